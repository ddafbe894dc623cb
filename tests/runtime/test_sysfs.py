"""sysfs backend on a loop device's queue attributes, including the scheduler enum."""

import subprocess
from pathlib import Path

import pytest
from xtune.knobs.table import KnobError


@pytest.fixture
def loopdev(tmp_path):
    backing = tmp_path / "disk.img"
    with open(backing, "wb") as f:
        f.truncate(64 << 20)
    dev = subprocess.run(
        ["losetup", "-f", "--show", str(backing)], check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        yield Path("/sys/block") / Path(dev).name / "queue"
    finally:
        subprocess.run(["losetup", "-d", dev], check=True)


def attr(q: Path, name: str) -> str:
    return (q / name).read_text().strip()


def test_queue_attributes_and_scheduler_enum(xrtd, loopdev):
    q = loopdev
    before = {a: attr(q, a) for a in ("scheduler", "nr_requests", "read_ahead_kb")}
    assert "[" in before["scheduler"]
    c = xrtd.client()
    sched = c.register("sched", "sysfs", str(q / "scheduler"))
    # No enum given: the file's own choices are taken, the bracketed one is the value.
    assert sched["type"] == "enum"
    assert sched["enum"] == before["scheduler"].replace("[", "").replace("]", "").split()
    assert f"[{sched['text']}]" in before["scheduler"]
    c.register("nr_requests", "sysfs", str(q / "nr_requests"), min=4, max=1024)
    c.register("read_ahead", "sysfs", str(q / "read_ahead_kb"), min=0, max=8192, step=4)

    k = c.set("sched", "mq-deadline", reason="test: deadline for reads")
    assert k["text"] == "mq-deadline"
    assert "[mq-deadline]" in attr(q, "scheduler")
    c.set("nr_requests", 64)
    c.set("read_ahead", 128)
    assert (attr(q, "nr_requests"), attr(q, "read_ahead_kb")) == ("64", "128")
    with pytest.raises(KnobError, match="not min 0 plus a multiple of step 4"):
        c.set("read_ahead", 130)

    assert xrtd.stop() == 0
    assert {a: attr(q, a) for a in before} == before


def test_scheduler_the_device_lacks_fails_and_changes_nothing(xrtd, loopdev):
    q = loopdev
    before = attr(q, "scheduler")
    c = xrtd.client()
    current = before.split("[")[1].split("]")[0]
    c.register("sched", "sysfs", str(q / "scheduler"), enum=[current, "no-such-iosched"])
    with pytest.raises(KnobError, match="scheduler: write 'no-such-iosched'"):
        c.set("sched", "no-such-iosched")
    assert attr(q, "scheduler") == before
    k = c.get("sched")
    assert (k["state"], k["text"]) == ("failed", current)
    assert "failed via=socket" in xrtd.audit()


def test_scheduler_restored_after_kill9(xrtd, loopdev):
    q = loopdev
    before = attr(q, "scheduler")
    c = xrtd.client()
    c.register("sched", "sysfs", str(q / "scheduler"))
    c.set("sched", "kyber" if "[kyber]" not in before else "mq-deadline")
    assert attr(q, "scheduler") != before
    xrtd.kill9()
    xrtd.start()  # the enum values come back from the journal
    assert attr(q, "scheduler") == before


def test_tuner_sees_enum_knobs_by_name(xrtd, loopdev):
    """The tuner's view of an enum knob (what trials store and reports print) is the choice's name,
    not xrtd's index of it."""
    from xtune.config.schema import Knob
    from xtune.knobs.actuator import Actuator

    q = loopdev
    before = attr(q, "scheduler")
    current = before.split("[")[1].split("]")[0]
    other = next(c for c in before.replace("[", "").replace("]", "").split() if c != current)
    knob = Knob(
        name="sched", backend="sysfs", target=str(q / "scheduler"), type="enum", values=[current, other]
    )
    act = Actuator(xrtd.socket, [knob])
    try:
        assert act.original == {"sched": current}
        assert act.apply({"sched": other}, "test") == {"sched": other}
        assert f"[{other}]" in attr(q, "scheduler")
        assert act.rollback("test") == {"sched": current}
    finally:
        act.close(restore=True)
    assert attr(q, "scheduler") == before


def test_a_write_that_moves_another_knob_is_undone_on_it(xrtd, loopdev):
    """The kernel recomputes a queue's read_ahead_kb when its max_sectors_kb is written: a
    transaction setting both (read-ahead first) must leave both in force, and one setting only
    max_sectors_kb must leave the registered read-ahead where it was, not where the kernel put it."""
    q = loopdev
    before = {a: attr(q, a) for a in ("read_ahead_kb", "max_sectors_kb")}
    c = xrtd.client()
    c.register("read_ahead", "sysfs", str(q / "read_ahead_kb"), min=0, max=16384)
    hw_max = int(attr(q, "max_hw_sectors_kb"))
    c.register("max_sectors", "sysfs", str(q / "max_sectors_kb"), min=4, max=hw_max)
    with c.transaction():
        c.set("read_ahead", 16, reason="test: small read-ahead")
        c.set("max_sectors", 116, reason="test: small requests")
    assert (attr(q, "read_ahead_kb"), attr(q, "max_sectors_kb")) == ("16", "116")
    assert c.get("read_ahead")["applied"] == 16
    c.set("max_sectors", 200)  # the registered read-ahead, unchanged, is held at 16
    assert (attr(q, "read_ahead_kb"), attr(q, "max_sectors_kb")) == ("16", "200")
    assert "held" in xrtd.audit() and "moved by a write of max_sectors" in xrtd.audit()
    assert xrtd.stop() == 0
    assert {a: attr(q, a) for a in before} == before

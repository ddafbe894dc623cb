"""TuneD's [disk] plugin read for the block case: readahead (KiB, ` s` sectors, `>N` at least N)
on the case's device queue, a `devices=` list that does not take the device, options with no queue
attribute, and a case without a device; and a BO best value of an enum knob read back by name."""

from __future__ import annotations

from pathlib import Path

from cases.run import best_value
from cases.tuned import contender
from xtune.config.schema import Knob

DEVICE = "loop-test-absent"  # no such queue in /sys: `>N` falls back to N
QUEUE = f"/sys/block/{DEVICE}/queue"


def profile(root: Path, name: str, text: str) -> None:
    (root / name).mkdir()
    (root / name / "tuned.conf").write_text(text)


def test_disk_options_on_the_device(tmp_path: Path) -> None:
    profile(tmp_path, "base", "[disk]\nreadahead=>4096\napm=128\n[sysctl]\nvm.swappiness=10\n")
    profile(tmp_path, "child", "[main]\ninclude=base\n[nvme]\ntype=disk\ndevices=nvme*\nreadahead=0\n")
    c = contender("child", None, root=tmp_path, device=DEVICE)
    assert c.settings == {"vm.swappiness": 10, f"{QUEUE}/read_ahead_kb": 4096}
    reasons = {n["key"]: n["reason"] for n in c.not_applicable}
    assert reasons["[disk] apm"] == "[disk] apm: no queue attribute this case sets for it"
    assert reasons["[nvme] readahead"] == f"devices=nvme* does not take {DEVICE}"


def test_sectors_and_missing_scheduler(tmp_path: Path) -> None:
    profile(tmp_path, "p", "[disk]\nreadahead=8192 s\nelevator=mq-deadline\n")
    c = contender("p", None, root=tmp_path, device=DEVICE)
    assert c.settings == {f"{QUEUE}/read_ahead_kb": 4096}
    assert c.not_applicable == [
        {"key": f"{QUEUE}/scheduler", "value": "mq-deadline", "reason": "not a scheduler of this queue ([])"}
    ]


def test_no_device_lists_every_disk_option(tmp_path: Path) -> None:
    profile(tmp_path, "p", "[disk]\nreadahead=>4096\n")
    c = contender("p", None, root=tmp_path)
    assert c.settings == {}
    assert c.not_applicable[0]["reason"] == "plugin [disk]: the case has no block device of its own"


def test_best_enum_value_by_name() -> None:
    knob = Knob(name="scheduler", backend="sysfs", target="/sys/x", type="enum", values=["none", "bfq"])
    assert best_value(knob, 1) == "bfq" and best_value(knob, "none") == "none"
    assert best_value(Knob(name="ra", backend="sysfs", target="/sys/y", range=(1, 9)), 4.0) == 4

"""The table watcher's scheduling (--slice-us, --rt-priority) and the publish time in each slot."""

import subprocess
import time

import pytest
from xtune import paths
from xtune.testing.sched import sched_fields


def watcher_and_main(pid: int) -> tuple[dict[str, int], dict[str, int]]:
    threads = sched_fields(pid)
    others = [f for tid, f in threads.items() if tid != pid]
    assert len(others) == 1, threads  # xrtd runs its main loop and the watcher thread only
    return others[0], threads[pid]


@pytest.mark.parametrize(
    "args,slice_ns",
    [((), 100_000), (("--slice-us", "300"), 300_000), (("--slice-us", "0"), None)],
)
def test_watcher_slice(xrtd_factory, args, slice_ns):
    x = xrtd_factory(*args)
    watcher, main = watcher_and_main(x.proc.pid)
    assert watcher["policy"] == main["policy"] == 0  # SCHED_OTHER
    # None: the host's default slice, the one the main thread has.
    assert watcher["se.slice"] == (slice_ns or main["se.slice"])


def test_rt_priority_makes_the_watcher_fifo(xrtd_factory):
    x = xrtd_factory("--rt-priority", "1")
    watcher, main = watcher_and_main(x.proc.pid)
    assert (watcher["policy"], main["policy"]) == (1, 0)  # SCHED_FIFO, only the watcher


@pytest.mark.parametrize("value", ["50", "100001", "x"])
def test_bad_slice_is_refused(tmp_path, value):
    argv = ["--socket", str(tmp_path / "s"), "--state-dir", str(tmp_path / "st"), "--slice-us", value]
    res = subprocess.run([str(paths.binary("xrtd")), *argv], capture_output=True, text=True, timeout=10)
    assert res.returncode == 2
    assert f"--slice-us {value}: 0 (default slice) or 100..100000" in res.stderr


def test_slot_carries_the_publish_time(xrtd, netns):
    c = xrtd.client()
    k = c.register(
        "somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=f"/run/netns/{netns}"
    )
    with c.table() as table:
        registered = table.read(k["slot"]).applied_ns
        t0 = time.monotonic_ns()
        gen = table.write_desired(k["slot"], 2048, ring=True)
        view = table.wait_applied(k["slot"], gen, timeout=5)
        assert registered < t0 <= view.applied_ns <= time.monotonic_ns()

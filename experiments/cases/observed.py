"""What xobserve costs on a case's own load: the defaults measured again, in the same interleaved
run, with xobserve running as it starts by default (every default family: sched, softirq, block,
pmu, tcp, mem; 10 ms windows), scoped as a case would scope it (the tcp family to the server's
namespace, the block family to the case's loop device). Its objective over the defaults' in the
same repetition is the overhead, on the load the tuner would observe, not a synthetic one.

The run is judged only if the families saw it: the frames whose windows lie within the benchmark
run are read back from the ring (sized to hold the whole run) and summed, and a run in which
xobserve lost frames, or none of its windows fell inside, fails like a run without its metric.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from xtune import paths
from xtune.host.services import free_port
from xtune.signals.frames import ShmFrameReader
from xtune.testing.stats import mean_ci95

from cases.paired import ratio_ci95

NAME = "defaults-observed"
WINDOW_MS = 10
# 8192 windows of 10 ms: 80 s, more than any case's run, so the ring still holds the first window
# of a run when it is read after it.
SLOTS = 8192
# Signals that show the families meeting the load (per second of the run); a family the load does
# not reach (block on a network case) reads 0.
SEEN = ("sched.wakeups", "sched.switches", "softirq.net_rx.count", "tcp.rtt_samples", "block.ops")


class NotObserved(RuntimeError):
    """xobserve did not run, lost frames, or none of its windows covered the benchmark run."""


@dataclass
class Observer:
    """xobserve for the runs of the observed defaults; `last`: what it saw of the latest run."""

    netns: str | None = None  # the server's namespace name (tcp family scope)
    device: str | None = None  # the loop device's name (block family scope)
    last: dict[str, float] = field(default_factory=dict)
    args: list[str] = field(init=False)  # read while the device exists: the JSON names them after

    def __post_init__(self) -> None:
        self.args = ["--window-ms", str(WINDOW_MS), "--shm-slots", str(SLOTS)]
        if self.netns:
            self.args += ["--netns", self.netns]
        if self.device:
            self.args += ["--block-dev", Path(f"/sys/block/{self.device}/dev").read_text().strip()]

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """xobserve up for the block (the benchmark run); `last` filled from its frames after."""
        shm = f"xt-case-obs-{os.getpid()}-{os.urandom(2).hex()}"
        cmd = [str(paths.binary("xobserve")), "--shm", shm, "--zmq", f"tcp://127.0.0.1:{free_port()}"]
        proc = subprocess.Popen(cmd + self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ring = Path("/dev/shm") / shm
        try:
            deadline = time.monotonic() + 60
            while not ring.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise NotObserved(f"xobserve did not start: {_stderr(proc)}")
                time.sleep(0.01)
            time.sleep(2 * WINDOW_MS / 1000)  # its first windows close before the run starts
            t0 = time.monotonic_ns()
            yield
            t1 = time.monotonic_ns()
            time.sleep(2 * WINDOW_MS / 1000)  # the run's last window closes
            self.last = seen(shm, t0, t1)
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            ring.unlink(missing_ok=True)


def seen(shm: str, t0: int, t1: int) -> dict[str, float]:
    """The SEEN signals per second over the windows wholly inside [t0, t1], and their count."""
    sums = dict.fromkeys(SEEN, 0.0)
    covered = windows = 0
    with ShmFrameReader(shm, from_start=True) as reader:
        while (frame := reader.poll(0.5)) is not None:
            if t0 <= frame.window_start_ns and frame.window_end_ns <= t1:
                covered += frame.window_ns
                windows += 1
                for name in SEEN:
                    sums[name] += frame.values.get(name, 0.0)
            if frame.window_end_ns >= t1:
                break
        lost = reader.stats.lost + reader.stats.producer_dropped
    if lost:
        raise NotObserved(f"xobserve lost {lost} frames during the run")
    if not windows:
        raise NotObserved("no window of xobserve lies within the benchmark run")
    per_s = {name.replace(".", "_"): v / (covered / 1e9) for name, v in sums.items()}
    return {**per_s, "windows": float(windows)}


def _stderr(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    return (proc.stderr.read() if proc.stderr else "").strip()[-400:]


def overhead(
    observer: Observer, observed: list[dict], defaults: list[dict], maximize: bool, p99: str
) -> dict:
    """The observed defaults over the defaults, repetition by repetition, with what the families saw."""
    ok = [r for r in observed if "objective" in r]
    mine = {r["rep"]: r["objective"] for r in ok}
    base = {r["rep"]: r["objective"] for r in defaults if "objective" in r}
    return {
        "xobserve": " ".join(["xobserve", *observer.args]),
        "families": "xobserve's defaults: sched, softirq, block, pmu, tcp, mem",
        # observed / defaults in the same repetition: a cost is below 1 for an objective maximized,
        # above 1 for one minimized (the network case's p99).
        "ratio": ratio_ci95(mine, base),
        "cost_when": "below 1" if maximize else "above 1",
        "objective": mean_ci95(list(mine.values())),
        "p99_ms": mean_ci95([r["metrics"][p99] for r in ok]),
        "seen_per_s": {k: mean_ci95([r["seen"][k] for r in ok]) for k in (ok[0]["seen"] if ok else {})},
        "failed_runs": [r["failed"] for r in observed if "failed" in r],
        "runs": [r.get("objective") for r in observed],
    }

"""One measurement: up to eight functions of the process probed by a private xobserve (func
family, scoped to the pid) for a number of seconds, then the probes removed with it. (`Services`
starts a private xrtd beside it, which holds no knob and goes with it.)"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass

from xtune.drill.freeze import Frozen, thread_count
from xtune.drill.image import DrillError
from xtune.host.services import Services
from xtune.signals.frames import ShmFrameReader
from xtune.signals.window import Window, WindowAggregator

MAX_PROBES = 8  # xobserve's --func slots (XT_MAX_FUNCS)
WINDOW_MS = 100  # frames long enough for each latency histogram to hold samples
ATTEMPTS = 3
ATTACH_ERROR = re.compile(r"cannot uprobe (\S+) in (\S+): (.*)")


@dataclass(frozen=True)
class Probe:
    name: str
    path: str  # as xobserve opens it (through /proc/PID/root when the process has another root)


@dataclass
class Stats:
    calls_per_s: float
    concurrency: float  # threads inside on average: calls/s × mean latency (Little's law)
    latency_p50_us: float | None  # None: no call returned in the measurement
    latency_p99_us: float | None


class ProbeRefused(DrillError):
    """xobserve could not place one of the probes; the others may be measured without it."""

    def __init__(self, probe: Probe, reason: str) -> None:
        super().__init__(f"cannot uprobe {probe.name} in {probe.path}: {reason}")
        self.probe, self.reason = probe, reason


def measure(pid: int, probes: list[Probe], seconds: float) -> dict[str, Stats]:
    """Stats per function name; ProbeRefused names a probe xobserve refused or could not measure.

    The process's threads are held while xobserve places the probes (freeze.py says why); should
    a thread still read as inside for good, the measurement is taken again, and refused if that
    keeps showing."""
    if not 0 < len(probes) <= MAX_PROBES or len({p.name for p in probes}) != len(probes):
        raise ValueError(f"1..{MAX_PROBES} probes of distinct names, not {[p.name for p in probes]}")
    for _ in range(ATTEMPTS):
        stats = _measure_once(pid, probes, seconds)
        stuck = [name for name, s in stats.items() if _missed_return(s, pid)]
        if not stuck:
            return stats
    probe = next(p for p in probes if p.name == stuck[0])
    raise ProbeRefused(
        probe,
        f"a thread read as always inside it in {ATTEMPTS} measurements (calls that do not return "
        f"within {seconds:g} s, or one entered while its probes were being placed): no figure for it",
    )


def _missed_return(s: Stats, pid: int) -> bool:
    """A thread counted inside for good: no call returned, yet a thread inside all along, or more
    threads inside than the process has."""
    threads = thread_count(pid)
    no_return = s.calls_per_s > 0 and s.latency_p50_us is None and s.concurrency >= 0.99
    return no_return or s.concurrency > threads + 0.05


def _measure_once(pid: int, probes: list[Probe], seconds: float) -> dict[str, Stats]:
    funcs = [f"{p.path}:{p.name}" for p in probes]
    try:
        with contextlib.ExitStack() as stack:
            with Frozen(pid):
                svc = stack.enter_context(Services(["func"], funcs=funcs, window_ms=WINDOW_MS, pid=pid))
            running_from = time.monotonic_ns()
            reader = stack.enter_context(ShmFrameReader(svc.signals_shm))
            window = _one_window(reader, seconds, svc, running_from)
    except RuntimeError as e:  # Services: xobserve did not start, with its log
        raise _refusal(str(e), probes) from None
    out = {}
    for p in probes:
        v = window.values
        key = f"func.{p.name}"
        out[p.name] = Stats(
            v.get(f"{key}.calls", 0.0), v.get(f"{key}.concurrency", 0.0), v.get(f"{key}.latency.p50"),
            v.get(f"{key}.latency.p99"),
        )  # fmt: skip
    return out


def _one_window(reader: ShmFrameReader, seconds: float, svc: Services, running_from: int) -> Window:
    """The frames of `seconds` that began once the threads ran again."""
    agg = WindowAggregator(int(seconds * 1e9))
    deadline = time.monotonic() + seconds + 10
    window = None
    while window is None:
        frame = reader.poll(0.5)
        if frame is not None and frame.window_start_ns >= running_from:
            agg.catalog = reader.catalog
            window = agg.add(frame)
        if frame is None and time.monotonic() > deadline:
            raise DrillError(
                f"xobserve published no frame for {seconds + 10:g} s: {svc.log('xobserve')[-400:]}"
            )
    return window


def _refusal(log: str, probes: list[Probe]) -> DrillError:
    for line in log.splitlines():
        m = ATTACH_ERROR.search(line)
        if m:
            for p in probes:
                if p.name == m.group(1) and p.path == m.group(2):
                    return ProbeRefused(p, m.group(3))
    return DrillError(f"xobserve did not start: {log.strip()[-400:]}")

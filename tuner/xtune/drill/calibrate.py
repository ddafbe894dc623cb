"""What a probe costs on this host, measured the way the drill probes: a helper process does
nothing but call a function that does nothing (glibc's `labs`), timed in rounds while unprobed,
then under a private xobserve's func probe, where its call rate gives the time per call. The
caller's extra time per call is the full cost (`caller_s`: entry and return traps), the
function's own measured mean latency the part of it inside a callee's figures (`inside_s`)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import threading
from dataclasses import dataclass

from xtune.drill.image import DrillError
from xtune.drill.measure import Probe, measure
from xtune.drill.process import Process

CALLS = 20000  # per timed round
HELPER = f"""
import ctypes, sys, time
labs = ctypes.CDLL("libc.so.6").labs
while True:
    t = time.perf_counter()
    for _ in range({CALLS}):
        labs(-1)
    print(time.perf_counter() - t, flush=True)
"""


@dataclass(frozen=True)
class ProbeCost:
    caller_s: float  # added to the caller per probed call
    inside_s: float  # of which inside the probed function's own latency


def probe_cost(seconds: float = 1.0) -> ProbeCost:
    helper = subprocess.Popen([sys.executable, "-c", HELPER], stdout=subprocess.PIPE, text=True)
    rounds: list[float] = []
    try:
        assert helper.stdout is not None
        out = helper.stdout

        def read() -> None:
            for line in out:
                rounds.append(float(line))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        while len(rounds) < 5:
            if helper.poll() is not None:
                raise DrillError("the probe-cost helper exited")
            threading.Event().wait(0.05)
        before = statistics.median(rounds[1:])
        proc = Process(helper.pid)
        hit = proc.defining("labs")
        if hit is None:
            raise DrillError("no labs in the helper's libc: cannot measure the probe cost")
        stats = measure(helper.pid, [Probe("labs", proc.path_of(hit[0]))], seconds)["labs"]
    finally:
        helper.kill()
        helper.wait()
    if not stats.calls_per_s:
        raise DrillError("the probe-cost helper made no call under the probe")
    # The helper's one thread only calls labs: one call per 1 / rate seconds.
    caller = 1 / stats.calls_per_s - before / CALLS
    return ProbeCost(max(0.0, caller), stats.concurrency / stats.calls_per_s)

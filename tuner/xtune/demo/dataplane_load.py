"""The dataplane server's client-side measure: `dataplane-loadgen` run and its output parsed.

The load generator (experiments/dataplane/loadgen.c) sends open-loop Poisson load in phases
`SECONDS:RATE:FLOWS`, prints `phase I` at each phase start, one JSON line per phase (sent,
answered, p50/p99 latency, send to reply), a pooled line (`"phase": "all"`) and, with `--series
MS`, the p99 of the requests sent in each MS-long slice. The demo and
experiments/bench_adaptive_dataplane.py read it through these functions only.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence

from xtune import paths


def loadgen(
    port: int,
    phases: Sequence[str],
    on_phase: Callable[[int], object] | None = None,
    series_ms: float | None = None,
) -> dict:
    """Run the load generator; call on_phase(i) at each phase start; its pooled "all" line, with
    "phases" and, given series_ms, "series" (the p99 of each slice of the run, and its start in
    time.monotonic_ns)."""
    series = ["--series", str(series_ms)] if series_ms else []
    gen = subprocess.Popen(
        [str(paths.binary("dataplane-loadgen")), *series, str(port), *phases],
        stdout=subprocess.PIPE,
        text=True,
    )
    started = 0
    assert gen.stdout is not None
    result: dict = {}
    per_phase = []
    for line in gen.stdout:
        if line.startswith("phase "):
            started = started or time.monotonic_ns()
            if on_phase is not None:
                on_phase(int(line.split()[1]))
        elif line.startswith("{"):
            doc = json.loads(line)
            if "series_ms" in doc:
                result["series"] = {**doc, "start_ns": started}
            elif doc.get("phase") == "all":
                result = doc
            else:
                per_phase.append(doc)
    if gen.wait() != 0 or "p99_us" not in result:
        raise RuntimeError(f"load generator failed (exit {gen.returncode}) or printed no pooled line")
    result["phases"] = per_phase
    return result


def phase_p99(doc: dict) -> float:
    """The mean over the schedule's phases of each phase's p99: every load regime's tail counts alike."""
    return statistics.mean(p["p99_us"] for p in doc["phases"])


def throughput(doc: dict) -> float:
    """Requests answered per second of the schedule."""
    return doc["answered"] / sum(float(p["seconds"]) for p in doc["phases"])

"""The demo's before/after figures, from `xtune demo` itself (the command `make demo` runs).

Each repetition runs `xtune demo --json FILE` in a fresh output directory: the three phases
(bufferbloat sysctls through a 100 Mbit/s bottleneck, RX_BATCH_SIZE through SIE, the tree deciding
it live under a shifting load) exactly as a user sees them, and the figures of their tables as
data (tuner/xtune/demo/figures.py). The demo's figures move a lot from one run to the next (its
BO budget is small, the adaptive phase runs one short schedule, the host is shared), so the
benchmark repeats it (3 runs by default) and reports each figure's mean with its 95 % confidence
interval (Student's t over the runs), the knob values each run chose, and every run's figures.

Writes experiments/results/demo.json. Needs root and `make build`; about 4 minutes a run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from resultfile import write_result
from xtune import paths
from xtune.testing.stats import mean_ci95

# What a demo run executes and measures: the demo package (its phases, network, figures, SLO
# templates, and the dataplane load and policy it shares with the adaptive benchmark), the
# workloads it builds (experiments/demo's bulk sender, experiments/dataplane's server, load
# generator and analyze spec), the tuning loop and policies, SIE analysis, the daemons and the
# network-namespace helpers.
SOURCES = [
    "experiments/bench_demo.py",
    "tuner/xtune/demo",
    "tuner/xtune/host/netns.py",
    "tuner/xtune/host/services.py",
    "tuner/xtune/tuning",
    "tuner/xtune/policies",
    "tuner/xtune/learning",
    "tuner/xtune/signals",
    "tuner/xtune/knobs",
    "tuner/xtune/sie",
    "tuner/xtune/config",
    "experiments/demo",
    "experiments/dataplane",
    "observers",
    "runtime/xrtd",
    "runtime/sie",
    "lib/zmq_curve",  # linked into xobserve
]
TIMEOUT_S = 1200  # one demo run takes about 4 minutes here; a run past this is stuck


def run_once(out: Path, short: bool) -> dict[str, Any]:
    doc = out / "figures.json"
    xtune = str(Path(sys.executable).with_name("xtune"))
    cmd = [xtune, "demo", "--ascii", "--out", str(out), "--json", str(doc)]
    if short:
        cmd.append("--short")
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    (out / "demo.log").write_text(res.stdout + res.stderr)
    # Exit 1 with the figures written: the first phase kept no values (no trial held its SLO); a
    # run's outcome like any other, its `after` null.
    if not doc.exists():
        tail = (res.stdout + res.stderr)[-1500:]
        raise RuntimeError(f"{' '.join(cmd)} exited {res.returncode} without its figures: {tail}")
    return {**json.loads(doc.read_text()), "exit_code": res.returncode, "seconds": time.monotonic() - t0}


def values(runs: list[dict], *path: str | int) -> list[float]:
    """The figure at `path` in every run where it was measured (not null)."""
    out = []
    for run in runs:
        x: Any = run
        for p in path:
            x = None if x is None else x[p]
        if x is not None:
            out.append(float(x))
    return out


def tuning_summary(runs: list[dict], phase: str) -> dict[str, Any]:
    first = runs[0][phase]
    kept = [r for r in runs if r[phase]["after"] is not None] or runs  # runs whose values were kept
    return {
        "objective": first["objective"],
        "objective_unit": first["objective_unit"],
        "before": mean_ci95(values(runs, phase, "before", "objective")),
        "after": mean_ci95(values(runs, phase, "after", "objective")),
        "gain": mean_ci95(values(runs, phase, "gain")),
        "slo": [
            {
                "line": line["line"],
                "unit": line["unit"],
                "before": mean_ci95(values(runs, phase, "slo", i, "before")),
                "after": mean_ci95(values(runs, phase, "slo", i, "after")),
            }
            for i, line in enumerate(first["slo"])
        ],
        "knobs": {
            name: {
                "before": knob["before"],
                "after_runs": [r[phase]["knobs"][name]["after"] for r in kept],
                "after_min": min(r[phase]["knobs"][name]["after"] for r in kept),
                "after_max": max(r[phase]["knobs"][name]["after"] for r in kept),
            }
            for name, knob in first["knobs"].items()
        },
        "runs_with_after": sum(r[phase]["after"] is not None for r in runs),
        "trials": [r[phase]["trials"] for r in runs],
        "rollbacks": [r[phase]["rollbacks"] for r in runs],
    }


def summary(runs: list[dict]) -> dict[str, Any]:
    sie = tuning_summary(runs, "sie")
    # The client's own p50: first entry the compiled value, second the chosen one (runs that kept one).
    kept = [r for r in runs if r["sie"]["after"] is not None and len(r["sie"]["client_p50_us"]) == 2]
    sie["client_p50_us"] = {
        "compiled": mean_ci95(values(runs, "sie", "client_p50_us", 0, "p50_us")),
        "chosen": mean_ci95([r["sie"]["client_p50_us"][1]["p50_us"] for r in kept]),
    }
    sie["text_restored_runs"] = sum(r["sie"]["text_restored"] for r in runs)
    adaptive: dict[str, Any] = {
        side: {
            k: mean_ci95(values(runs, "adaptive", side, k))
            for k in ("phase_p99_us", "pooled_p99_us", "throughput_rps")
        }
        for side in ("before", "after")
    }
    adaptive["compiled"] = runs[0]["adaptive"]["compiled"]
    adaptive["changes"] = mean_ci95(values(runs, "adaptive", "changes"))
    adaptive["values_in_effect"] = sorted({v for r in runs for v in r["adaptive"]["values_in_effect"]})
    adaptive["phases"] = [
        {
            "rate": p["rate"],
            "flows": p["flows"],
            "before_p99_us": mean_ci95(values(runs, "adaptive", "phases", i, "before_p99_us")),
            "after_p99_us": mean_ci95(values(runs, "adaptive", "phases", i, "after_p99_us")),
        }
        for i, p in enumerate(runs[0]["adaptive"]["phases"])
    ]
    adaptive["text_restored_runs"] = sum(r["adaptive"]["text_restored"] for r in runs)
    return {"bufferbloat": tuning_summary(runs, "bufferbloat"), "sie": sie, "adaptive": adaptive}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3, help="demo runs (default 3)")
    ap.add_argument("--short", action="store_true", help="`xtune demo --short` runs; prints, writes no JSON")
    args = ap.parse_args()
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    paths.binary("xtune-bulk")  # refuses early, naming `make build`, when the workloads are not built
    runs = []
    with tempfile.TemporaryDirectory(prefix="xtune-bench-demo-") as tmp:
        for i in range(args.reps):
            print(f"demo run {i + 1} of {args.reps} ...", flush=True)
            folder = Path(tmp) / f"run{i}"
            folder.mkdir()
            runs.append(run_once(folder, args.short))
            print(f"  {runs[-1]['seconds']:.0f} s", flush=True)
    out = {
        "command": "xtune demo --json FILE (what `make demo` runs, with its figures written as data)",
        "repetitions": args.reps,
        "statistics": "mean and 95 % CI (Student's t) over the runs; n: the runs that measured the figure",
        "summary": summary(runs),
        "runs": runs,
    }
    if args.short:
        print(json.dumps(out["summary"], indent=1))
    else:
        print(write_result("demo", out, SOURCES))


if __name__ == "__main__":
    main()

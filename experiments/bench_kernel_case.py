"""Kernel adaptive case: BLK_MAX_REQUEST_COUNT retuned through xsie.ko by a trained policy in a
QEMU guest (Debian's kernel under TCG), against every static value of a grid.

Two disks in the guest (kmod/guest/case/lib.sh): a slow null_blk (timer completion after 200 us,
16 tags: a value above a round's size leaves it idle until the whole round is submitted) and a
fast one (inline completion: each extra flush is overhead, so a small value loses). The load is
plugload (io_submit rounds of N direct 4 KiB reads through a plug).

1. Record (kmod/guest/bench/kernel_case_record.sh): every value of the grid in each training
   regime (disk x N), 0.5 s windows of the disks' /sys/block/*/stat: reads per second, mean read
   latency, mean queue. Two sweeps: one to train on, one held out. This is also the landscape.
2. Train (xtune.learning.train.train_regimes, the tuner's own training): the windows become sweep
   recordings; labels are the measured best value per regime (the lowest mean read latency among
   the values within 95 % of the regime's best throughput, values within 5 % of the lowest counted
   equal); a decision tree over the three signals, with the guard's ranges and fallback, compiled
   to shell (xtune.policies.tree_shell) since the guest has no Python.
3. Evaluate (kmod/guest/bench/kernel_case_eval.sh): a schedule of phases not used in training
   (other N, order and lengths), fixed work per phase, run by each static value and by the policy
   (0.5 s windows, `xsiectl set` on a change: a flip after quiescence), contenders interleaved,
   3 repetitions. Figures are the schedule's mean read latency and time (both lower is better),
   with 95 % confidence intervals, and the same rule picks the best static value.

    .venv/bin/python experiments/bench_kernel_case.py
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
from pathlib import Path

from resultfile import committed_files, write_result
from xtune.learning.train import train_regimes
from xtune.policies.tree import TreeModel
from xtune.policies.tree_shell import shell_source
from xtune.sie.kernel import source as kernel_build
from xtune.signals.frames import Catalog, SignalInfo, encode_frame
from xtune.signals.recording import Decision, RecordingWriter
from xtune.testing import kernel_guest
from xtune.testing.stats import mean_ci95

KNOB = "BLK_MAX_REQUEST_COUNT"
DEFAULT = 32
FEATURES = ["ios_per_s", "lat_us", "queue_milli"]  # the order the guest prints and passes them
OBJECTIVE = "lat_us"  # mean read latency (time in the plug included)
WINDOW_NS = 500_000_000
WIN = re.compile(r"^XSIE-WIN (\S+) (\S+) (\d+) (\d+) (\d+) (\d+)", re.M)
DECISION = re.compile(r"^XSIE-DECISION (r\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", re.M)
EVAL = re.compile(r"(eval|evlat)_(\w+?)_r(\d+)_p(\d+)")
MIN_THROUGHPUT = 0.95  # the regimes' rule: within 95 % of the best throughput


def windows(console: str) -> dict[str, dict[str, dict[int, list[list[int]]]]]:
    """sweep -> regime -> value -> the windows' features, as the guest printed them."""
    out: dict[str, dict[str, dict[int, list[list[int]]]]] = {}
    for m in WIN.finditer(console):
        cell = out.setdefault(m[1], {}).setdefault(m[2], {}).setdefault(int(m[3]), [])
        cell.append([int(m[4]), int(m[5]), int(m[6])])
    return out


def write_recording(path: Path, sweep: dict[str, dict[int, list[list[int]]]]) -> None:
    """A sweep recording as `xtune record` writes one: per cell a sweep DECISION naming the regime,
    then its windows as frames."""
    catalog = Catalog(
        [SignalInfo(i, n, "", "gauge", "guest /sys/block/*/stat") for i, n in enumerate(FEATURES)], WINDOW_NS
    )
    seq, t = 0, 0
    with RecordingWriter(path) as rec:
        rec.append_catalog(catalog)
        for regime, by_value in sweep.items():
            for value, wins in by_value.items():
                rec.append_decision(Decision("sweep", {KNOB: value}, "sweep", extra={"regime": regime}))
                for w in wins:
                    items = [(i, 0, float(x)) for i, x in enumerate(w)]
                    rec.append_frame_of(encode_frame(seq, t, t + WINDOW_NS, items), catalog)
                    seq, t = seq + 1, t + WINDOW_NS


def landscape(wins: dict[str, dict[str, dict[int, list[list[int]]]]]) -> dict:
    """Per regime and value: reads per second and mean read latency (over both sweeps' windows, the
    first of each cell left out as it spans the flip); the best value by the regimes' rule and
    where the default stands against it."""
    out = {}
    for regime, by_value in wins["train"].items():
        cells = {v: [w for s in wins.values() for w in s[regime][v][1:]] for v in by_value}
        rate = {v: mean_ci95([w[0] for w in ws]) for v, ws in cells.items()}
        lat = {v: mean_ci95([w[1] for w in ws]) for v, ws in cells.items()}
        top = max(r["mean"] for r in rate.values())
        best = min(
            (v for v in cells if rate[v]["mean"] >= MIN_THROUGHPUT * top), key=lambda v: lat[v]["mean"]
        )
        out[regime] = {
            "reads_per_s": {str(v): r for v, r in rate.items()},
            "lat_us": {str(v): r for v, r in lat.items()},
            "best": best,
            "default_lat_over_best": lat[DEFAULT]["mean"] / lat[best]["mean"],
            "default_reads_share_of_top": rate[DEFAULT]["mean"] / top,
        }
    return out


def train(wins: dict, tmp: Path) -> tuple[TreeModel, str]:
    paths = {s: tmp / f"{s}.rec" for s in ("train", "heldout")}
    for sweep, path in paths.items():
        write_recording(path, wins[sweep])
    model = train_regimes(
        [paths["train"]], [paths["heldout"]], KNOB, OBJECTIVE, "ios_per_s", tmp / "model.json",
        features=FEATURES, max_depth=3, settle=1, tolerance=0.05, min_leaf_share=0.05,
    )  # fmt: skip
    return model, shell_source(model, FEATURES)


def evaluation(metrics: dict[str, int], reads: list[int]) -> dict:
    """Per contender: the schedule's seconds and its mean read latency (phases weighted by their
    reads) per repetition, their means with 95 % CIs, and both per phase (mean over repetitions)."""
    runs: dict[str, dict[int, dict[int, dict[str, float]]]] = {}
    for key, x in metrics.items():
        m = EVAL.fullmatch(key)
        if m:
            phase = runs.setdefault(m[2], {}).setdefault(int(m[3]), {}).setdefault(int(m[4]), {})
            phase["s" if m[1] == "eval" else "lat"] = x / 1e9 if m[1] == "eval" else x
    out = {}
    for c, reps in runs.items():
        phases = range(1, len(reads) + 1)
        out[c] = {
            "seconds": mean_ci95([sum(p[i]["s"] for i in phases) for p in reps.values()]),
            "lat_us": mean_ci95(
                [
                    sum(p[i]["lat"] * n for i, n in zip(phases, reads, strict=True)) / sum(reads)
                    for p in reps.values()
                ]
            ),
            "phase_seconds": [statistics.fmean(p[i]["s"] for p in reps.values()) for i in phases],
            "phase_lat_us": [statistics.fmean(p[i]["lat"] for p in reps.values()) for i in phases],
        }
    return out


def summary(ev: dict, reads: list[int]) -> dict:
    """The regimes' rule on the whole schedule: the best static value has the lowest mean read
    latency among those within 95 % of the fastest static's throughput; the oracle takes, per
    phase, the lowest-latency static within 95 % of that phase's fastest."""
    statics = {c: v for c, v in ev.items() if c != "adaptive"}
    fastest = min(v["seconds"]["mean"] for v in statics.values())
    eligible = [c for c, v in statics.items() if v["seconds"]["mean"] * MIN_THROUGHPUT <= fastest]
    best = min(eligible, key=lambda c: statics[c]["lat_us"]["mean"])
    oracle_s = oracle_lat = 0.0
    for i, n in enumerate(reads):
        top = min(v["phase_seconds"][i] for v in statics.values())
        ok = [v for v in statics.values() if v["phase_seconds"][i] * MIN_THROUGHPUT <= top]
        pick = min(ok, key=lambda v: v["phase_lat_us"][i])
        oracle_s += pick["phase_seconds"][i]
        oracle_lat += pick["phase_lat_us"][i] * n / sum(reads)
    a, d, b = ev["adaptive"], statics[str(DEFAULT)], statics[best]

    def apart(x: dict, y: dict) -> bool:  # the 95 % intervals do not overlap
        return bool(abs(x["mean"] - y["mean"]) > (x["ci95"] or 0) + (y["ci95"] or 0))

    def vs(other: dict) -> dict:
        return {
            "lat_ratio": a["lat_us"]["mean"] / other["lat_us"]["mean"],
            "seconds_ratio": a["seconds"]["mean"] / other["seconds"]["mean"],
            "lat_differs_beyond_ci": apart(a["lat_us"], other["lat_us"]),
            "seconds_differ_beyond_ci": apart(a["seconds"], other["seconds"]),
        }

    return {
        "best_static": {"value": int(best), "lat_us": b["lat_us"]["mean"], "seconds": b["seconds"]["mean"]},
        "eligible_statics": sorted(int(c) for c in eligible),
        "oracle": {"lat_us": oracle_lat, "seconds": oracle_s},
        "adaptive_vs_default": vs(d),
        "adaptive_vs_best_static": vs(b),
        "adaptive_over_oracle": {
            "lat_ratio": a["lat_us"]["mean"] / oracle_lat,
            "seconds_ratio": a["seconds"]["mean"] / oracle_s,
        },
    }


def decisions(console: str) -> dict:
    """What the policy chose: per repetition the (seconds since its first window, value) changes."""
    per: dict[str, list] = {}
    for m in DECISION.finditer(console):
        per.setdefault(m[1], []).append((int(m[2]), int(m[6]), int(m[7])))
    out = {}
    for rep, rows in per.items():
        t0 = rows[0][0]
        changes, last = [], None
        for t, _decided, applied in rows:
            if applied != last:
                changes.append([round((t - t0) / 1e9, 2), applied])
                last = applied
        out[rep] = {"windows": len(rows), "changes": changes}
    return out


def main() -> None:
    record, _ = kernel_guest.run_script("bench/kernel_case_record", [KNOB], timeout_s=900)
    wins = windows(record)
    with tempfile.TemporaryDirectory() as tmp:
        model, policy = train(wins, Path(tmp))
        policy_file = Path(tmp, "policy.sh")
        policy_file.write_text(policy)
        console, metrics = kernel_guest.run_script(
            "bench/kernel_case_eval", [KNOB], [policy_file], timeout_s=1200
        )
    schedule = re.search(r"^XSIE-SCHEDULE (.*)$", console, re.M)[1].split()
    reads = [int(p.split(":")[2]) for p in schedule]
    ev = evaluation(metrics, reads)
    env = kernel_build.KernelEnv.fetch()
    report = {
        "component": "kernel_case",
        "environment": {
            "guest": "qemu-system-x86_64 TCG (emulated, no KVM), 2 vCPUs, 1 GiB",
            "kernel": f"{env.package} {env.package_version}",
            "host": "2 shared cores",
            "note": "guest times are emulated-CPU times on a shared host: compare contenders, not to native",
        },
        "knob": KNOB,
        "default": DEFAULT,
        "disks": "nullb0: timer completion 200 us, 16 tags; nullb1: inline completion; both mq-deadline",
        "landscape": landscape(wins),
        "policy": {
            "features": FEATURES,
            "card": model.card,
            "shell": policy,
            "window_s": WINDOW_NS / 1e9,
        },
        "schedule": schedule,
        "schedule_format": "phases disk:requests per io_submit:reads (kernel_case_eval.sh)",
        "static": {c: v for c, v in ev.items() if c != "adaptive"},
        "adaptive": {**ev["adaptive"], "decisions": decisions(console)},
        **summary(ev, reads),
        "command": ".venv/bin/python experiments/bench_kernel_case.py",
    }
    write_result(
        "kernel_case",
        report,
        # kmod's guest tests and the case's smoke script do not run here
        [*committed_files("kmod", ("kmod/guest/tests", "kmod/guest/case/smoke.sh")),
         "experiments/bench_kernel_case.py", "tuner/xtune/testing/kernel_guest.py",
         "tuner/xtune/learning", "tuner/xtune/policies/tree_shell.py"],
    )  # fmt: skip
    print(
        json.dumps(
            {
                k: report[k]
                for k in ("best_static", "oracle", "adaptive_vs_default", "adaptive_vs_best_static")
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

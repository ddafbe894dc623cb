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
   recordings; labels are the measured best value per regime (fewest microseconds per read among
   the values within 95 % of the regime's best throughput, values within 5 % of the best counted
   equal); a decision tree over the three signals, with the guard's ranges and fallback, compiled
   to shell (xtune.policies.tree_shell) since the guest has no Python.
3. Evaluate (kmod/guest/bench/kernel_case_eval.sh): a schedule of phases not used in training
   (other N, order and lengths), fixed work per phase, run by each static value and by the policy
   (0.5 s windows, `xsiectl set` on a change: a flip after quiescence), contenders interleaved,
   3 repetitions. Figures are the schedule's time (lower is better) with 95 % confidence intervals.

    .venv/bin/python experiments/bench_kernel_case.py
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
from pathlib import Path

from resultfile import write_result
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
OBJECTIVE = "1000000 / ios_per_s"  # microseconds per read
WINDOW_NS = 500_000_000
WIN = re.compile(r"^XSIE-WIN (\S+) (\S+) (\d+) (\d+) (\d+) (\d+)", re.M)
DECISION = re.compile(r"^XSIE-DECISION (r\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", re.M)
EVAL = re.compile(r"eval_(\w+)_r(\d+)_p(\d+)")


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
    """Reads per second per regime and value (mean over both sweeps' windows, the first of each
    cell left out as it spans the flip), and the best value per regime."""
    out = {}
    for regime in wins["train"]:
        rates = {
            v: mean_ci95([w[0] for s in wins.values() for w in s[regime][v][1:]])
            for v in wins["train"][regime]
        }
        best = max(rates, key=lambda v: rates[v]["mean"])
        out[regime] = {
            "reads_per_s": {str(v): r for v, r in rates.items()},
            "best": best,
            "default_share_of_best": rates[DEFAULT]["mean"] / rates[best]["mean"],
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


def evaluation(metrics: dict[str, int]) -> dict:
    """Per contender: the schedule's seconds per repetition, their mean and 95 % CI, and per phase."""
    runs: dict[str, dict[int, dict[int, float]]] = {}
    for key, ns in metrics.items():
        m = EVAL.fullmatch(key)
        if m:
            runs.setdefault(m[1], {}).setdefault(int(m[2]), {})[int(m[3])] = ns / 1e9
    out = {}
    for c, reps in runs.items():
        totals = [sum(p.values()) for p in reps.values()]
        phases = sorted({i for p in reps.values() for i in p})
        out[c] = {
            "seconds": mean_ci95(totals),
            "per_repetition": totals,
            "phase_seconds": {str(i): statistics.fmean(p[i] for p in reps.values()) for i in phases},
        }
    return out


def summary(ev: dict) -> dict:
    statics = {c: v for c, v in ev.items() if c != "adaptive"}
    best = min(statics, key=lambda c: statics[c]["seconds"]["mean"])
    phases = ev[best]["phase_seconds"]
    oracle = sum(min(statics[c]["phase_seconds"][i] for c in statics) for i in phases)
    adaptive = ev["adaptive"]["seconds"]["mean"]

    def overlap(a: dict, b: dict) -> bool:  # 95 % intervals overlap: no difference shown
        return abs(a["mean"] - b["mean"]) <= (a["ci95"] or 0) + (b["ci95"] or 0)

    return {
        "best_static": {"value": int(best), "seconds": statics[best]["seconds"]["mean"]},
        "default_seconds": statics[str(DEFAULT)]["seconds"]["mean"],
        "oracle_seconds": oracle,
        "oracle_note": "per phase the static value fastest there (mean over repetitions), from its start",
        "adaptive_seconds": adaptive,
        "adaptive_over_default": adaptive / statics[str(DEFAULT)]["seconds"]["mean"],
        "adaptive_over_best_static": adaptive / statics[best]["seconds"]["mean"],
        "adaptive_over_oracle": adaptive / oracle,
        "adaptive_vs_default_within_noise": overlap(
            ev["adaptive"]["seconds"], statics[str(DEFAULT)]["seconds"]
        ),
        "adaptive_vs_best_static_within_noise": overlap(ev["adaptive"]["seconds"], statics[best]["seconds"]),
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
    ev = evaluation(metrics)
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
        "schedule": re.search(r"^XSIE-SCHEDULE (.*)$", console, re.M)[1].strip(),
        "schedule_format": "phases disk:requests per io_submit:reads (kernel_case_eval.sh)",
        "static": {c: v for c, v in ev.items() if c != "adaptive"},
        "adaptive": {**ev["adaptive"], "decisions": decisions(console)},
        **summary(ev),
        "command": ".venv/bin/python experiments/bench_kernel_case.py",
    }
    write_result(
        "kernel_case",
        report,
        ["kmod", "experiments/bench_kernel_case.py", "tuner/xtune/testing/kernel_guest.py",
         "tuner/xtune/learning", "tuner/xtune/policies/tree_shell.py"],
    )  # fmt: skip
    print(
        json.dumps(
            {k: report[k] for k in ("landscape", "best_static", "adaptive_seconds", "default_seconds")},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

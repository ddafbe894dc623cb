"""Benchmark of the tuning loop, side by side in one run.

1. Tree decisions: a depth-limited DecisionTreeClassifier fitted on signal-shaped data, timed per
   decision as compiled straight-line Python (`TreeModel.compile`), through `TreePolicy.decide`
   (feature lookup included) and through scikit-learn's `predict` on one row.
2. Frame path at 1 kHz: xobserve with 1 ms windows feeding `FramePump` for `--pump-seconds`
   while the Ax worker process fits and suggests; per-frame cost p50/p99/max, frames, frames lost.
3. Sample efficiency on the demo workload (bulk TCP through a 100 Mbit/s bottleneck, knobs
   tcp_rmem[2] in the receiver's namespace and tcp_wmem[2] in the sender's, minimize p99 RTT with
   throughput >= 95 % of baseline): exhaustive grid (`--grid-points`^2 trials), BO and random
   search (`--budget` trials each), same namespaces and daemons, one after the other. The grid's
   best point is then measured again over three times the windows (the grid minimum itself is the
   luckiest of many noisy measurements). Reported: trials each method needs to get within 5 % of
   that re-measured exhaustive best, Ax suggestion time, the best found.

Writes experiments/results/tuner.json. Needs root and `make build`.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from pathlib import Path
from typing import Any

from resultfile import write_result
from xtune import paths
from xtune.config import load
from xtune.config.schema import SloFile
from xtune.demo.bottleneck import Bottleneck
from xtune.host.services import Services
from xtune.knobs.actuator import Actuator
from xtune.policies import Outcome, make_policy
from xtune.policies.tree import TreeModel, TreePolicy
from xtune.signals.frames import ShmFrameReader
from xtune.testing.stats import percentile as pct
from xtune.trials.store import Store
from xtune.tuning.loop import FramePump, Runner, RunResult
from xtune.tuning.metrics import Metrics
from xtune.tuning.workload import Workload


def bench_tree(calls: int) -> dict[str, Any]:
    from sklearn.tree import DecisionTreeClassifier

    rng = random.Random(1)
    features = [f"sig{i}" for i in range(12)]
    rows = [[rng.lognormvariate(8, 2) for _ in features] for _ in range(20000)]
    labels = [int(r[0] > 3000) + 2 * int(r[3] > r[5]) + 4 * int(r[7] > 9000) for r in rows]
    tree = DecisionTreeClassifier(max_depth=10, random_state=0).fit(rows, labels)
    classes = [[c * 65536] for c in range(int(max(labels)) + 1)]
    model = TreeModel.from_sklearn(tree, features, ["k"], classes, {})
    decide = model.compile()
    policy = TreePolicy(model)
    samples = [dict(zip(features, r, strict=True)) for r in rows[:1000]]
    vectors = rows[:1000]

    def timed(fn, args: list[Any], n: int) -> list[float]:
        out = []
        for i in range(n):
            a = args[i % len(args)]
            t0 = time.perf_counter_ns()
            fn(a)
            out.append((time.perf_counter_ns() - t0) / 1000)
        return out

    compiled = timed(decide, vectors, calls)
    with_lookup = timed(policy.decide, samples, calls)
    sk = timed(lambda r: tree.predict([r]), vectors, min(calls, 5000))
    agree = sum(decide(r) == int(p) for r, p in zip(rows, tree.predict(rows), strict=True)) / len(rows)
    return {
        "depth": int(tree.get_depth()),
        "leaves": int(tree.get_n_leaves()),
        "features": len(features),
        "calls": calls,
        "compiled_us": {"p50": pct(compiled, 0.5), "p99": pct(compiled, 0.99)},
        "policy_decide_us": {"p50": pct(with_lookup, 0.5), "p99": pct(with_lookup, 0.99)},
        "sklearn_predict_us": {"p50": pct(sk, 0.5), "p99": pct(sk, 0.99)},
        "speedup_vs_sklearn_p50": pct(sk, 0.5) / pct(with_lookup, 0.5),
        "agreement_with_sklearn": agree,
        "target_us": 20,
    }


def bench_pump(seconds: float) -> dict[str, Any]:
    """1 kHz frames through FramePump while Ax fits and suggests in its worker process."""
    slo = load(
        paths.ROOT / "tests/tuner/slo_good/bufferbloat-bo.yaml",
        {
            "RECEIVER_NETNS": "/x",
            "SENDER_NETNS": "/y",
            "RECEIVER_ADDR": "10.0.0.1",
            "BULK": "/bin/true",
            "SHM": "x",
        },
    )
    slo = slo.model_copy(update={"policy": slo.policy.model_copy(update={"budget": 1000, "init_trials": 3})})
    with Services(["sched", "softirq", "tcp"], window_ms=1) as svc:
        reader = ShmFrameReader(svc.signals_shm)
        metrics = Metrics("bench")
        pump = FramePump(reader, 100_000_000, metrics)
        pump.start()
        policy = make_policy(slo, {0: 100.0})
        rng = random.Random(2)
        suggests = 0
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < seconds:
                index, params = policy.suggest()  # type: ignore[misc]
                obj = abs(math.log2(params["rcv_buf_max"]) - 17) + rng.random()
                policy.complete(index, params, Outcome(obj, 0.1, {0: (150 + rng.random(), 1.0)}, True))
                suggests += 1
        finally:
            policy.close()
            time.sleep(0.5)
            pump.stop()
            reader.close()
        lat = [x * 1e6 for x in pump.latencies]
        frames = reader.stats.frames
        return {
            "window_ms": 1,
            "seconds": round(time.monotonic() - t0, 1),
            "frames": frames,
            "frames_lost": reader.stats.lost,
            "producer_dropped": reader.stats.producer_dropped,
            "ax_suggestions_meanwhile": suggests,
            "per_frame_us": {"p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "max": max(lat)},
        }


def run_policy(slo: SloFile, svc: Services, store: Store) -> RunResult:
    actuator = Actuator(svc.xrtd_socket, slo.knobs)
    reader = ShmFrameReader(svc.signals_shm)
    assert slo.workload is not None
    runner = Runner(slo, actuator, reader, store, Metrics(slo.name), Workload(slo.workload))
    try:
        return runner.run(lambda bounds: make_policy(slo, bounds))
    finally:
        runner.close(restore=True)
        reader.close()


def trials_to_within(result: RunResult, target: float) -> int | None:
    """1-based index of the first trial meeting the SLO with an objective within 5 % of `target`."""
    for n, t in enumerate(result.trials, 1):
        if t.meets_slo and t.summary.objective <= 1.05 * target:
            return n
    return None


def bench_efficiency(budget: int, grid_points: int, tmp: Path) -> dict[str, Any]:
    bulk = str(paths.binary("xtune-bulk"))
    store = Store(f"sqlite:///{tmp / 'bench-tuner.db'}")
    out: dict[str, Any] = {}
    with Bottleneck() as net, Services(["tcp", "func"], funcs=[f"{bulk}:bulk_chunk"]) as svc:
        variables = {
            "RECEIVER_NETNS": net.path(net.receiver),
            "SENDER_NETNS": net.path(net.sender),
            "RECEIVER_ADDR": net.receiver_addr,
            "BULK": bulk,
            "BUDGET": str(budget),
        }
        base = load(paths.package_data("demo", "data", "bufferbloat.yaml"), variables)
        runs: dict[str, RunResult] = {}
        for kind in ("grid", "bo", "random"):
            policy = base.policy.model_copy(update={"kind": kind, "grid_points": grid_points, "seed": 11})
            slo = base.model_copy(update={"policy": policy, "name": f"bench-{kind}"})
            t0 = time.monotonic()
            runs[kind] = run_policy(slo, svc, store)
            out[kind] = {"seconds": round(time.monotonic() - t0, 1)}
        # The grid's minimum is biased low (the luckiest of 36 noisy measurements): measure the
        # grid's best point again over three times the windows and use that as the reference.
        grid_best = runs["grid"].best
        assert grid_best is not None
        confirm = base.policy.model_copy(
            update={"kind": "static", "profile": grid_best, "windows": 3 * base.policy.windows}
        )
        reference = run_policy(
            base.model_copy(update={"policy": confirm, "name": "bench-reference"}), svc, store
        )
    best = reference.trials[0].summary.objective
    for kind, r in runs.items():
        objs = [t.summary.objective for t in r.trials]
        out[kind].update(
            {
                "trials": len(r.trials),
                "trials_to_within_5pct_of_exhaustive_best": trials_to_within(r, best),
                "best_objective_us": min((o for o in objs if not math.isnan(o)), default=None),
                "best_values": r.best,
                "baseline_objective_us": r.before.objective,
                "rollbacks": r.rollbacks,
                "objective_per_trial_us": [round(o, 1) for o in objs],
                "values_per_trial": [t.params for t in r.trials],
            }
        )
    sug = runs["bo"].suggest_seconds
    out["ax_suggest_seconds"] = {"mean": statistics.fmean(sug), "p50": pct(sug, 0.5), "max": max(sug)}
    out["exhaustive_best"] = {
        "values": grid_best,
        "objective_us_in_grid": min(t.summary.objective for t in runs["grid"].trials if t.meets_slo),
        "objective_us_remeasured": best,
        "note": "trials_to_within_5pct uses the re-measured value",
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree-calls", type=int, default=100_000)
    ap.add_argument("--pump-seconds", type=float, default=20.0)
    ap.add_argument("--budget", type=int, default=15)
    ap.add_argument("--grid-points", type=int, default=6)
    ap.add_argument("--tmp", type=Path, default=paths.BUILD / "bench-tuner")
    args = ap.parse_args()
    args.tmp.mkdir(parents=True, exist_ok=True)
    (args.tmp / "bench-tuner.db").unlink(missing_ok=True)
    result: dict[str, Any] = {
        "command": "python experiments/bench_tuner.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "tmp"),
    }
    print("tree decisions ...", flush=True)
    result["tree_decision"] = bench_tree(args.tree_calls)
    print(json.dumps(result["tree_decision"]), flush=True)
    print("frame path at 1 kHz with Ax suggesting ...", flush=True)
    result["frame_path_1khz"] = bench_pump(args.pump_seconds)
    print(json.dumps(result["frame_path_1khz"]), flush=True)
    print("sample efficiency: grid, bo, random on the bottleneck workload ...", flush=True)
    result["sample_efficiency"] = bench_efficiency(args.budget, args.grid_points, args.tmp)
    out = write_result("tuner", result, ["tuner/xtune", "experiments/bench_tuner.py"])
    print(json.dumps(result["sample_efficiency"], indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

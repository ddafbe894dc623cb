"""Recipe for models/dataplane_rx_batch: the adaptive benchmark's tree, trained from measured sweeps.

Run as root from the repository (after `make build`); about 10 minutes:

    .venv/bin/python models/recipes/dataplane_rx_batch.py

It trains exactly what experiments/bench_adaptive_dataplane.py trains, with that benchmark's own
definitions (its regimes, grid, sweep rounds and cell lengths, imported from it, and the training
settings of tuner/xtune/demo/dataplane_policy.py): the dataplane server runs with its compiled
RX_BATCH_SIZE, xobserve uprobes serve_batch() and dp_round() at 1 ms windows, xrtd's sie-user
backend applies every grid value under every training regime (twice, each cell judged by its worse
round) and under the held-out regimes, and `train_regimes` labels each regime with its measured
best value. The model, its card (labels, held-out accuracy and regret, decision latency) and
CARD.md go to models/dataplane_rx_batch/. The sweeps are not shipped: at 1 ms windows they are
tens of megabytes.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xtune import paths

sys.path.insert(0, str(paths.ROOT / "experiments"))
import bench_adaptive_dataplane as bench  # noqa: E402  (the benchmark's definitions, not a copy)
from xtune.config import load_text  # noqa: E402
from xtune.demo import dataplane_policy  # noqa: E402
from xtune.demo.dataplane_policy import (  # noqa: E402
    WATCH,
    probes,
)
from xtune.host.services import Services, free_port  # noqa: E402
from xtune.knobs.actuator import Actuator  # noqa: E402
from xtune.policies.tree import TreeModel  # noqa: E402
from xtune.sie import attach as eng  # noqa: E402
from xtune.sie.analyze import analyze  # noqa: E402
from xtune.sie.spec import load_spec  # noqa: E402
from xtune.signals.frames import ShmFrameReader  # noqa: E402

NAME = "dataplane_rx_batch"
OUT = Path(__file__).resolve().parents[1] / NAME
SWEEP_S = 2.0  # the benchmark's cell length (its full run, not --quick)


def main() -> int:
    if os.geteuid() != 0:
        print("run as root: the recipe attaches uprobes and retunes a live process", file=sys.stderr)
        return 2
    table = analyze(load_spec(bench.SPEC))
    if not table.const(bench.CONST).tunable:
        print(f"{bench.CONST} is not tunable here: see `xtune analyze {bench.SPEC}`", file=sys.stderr)
        return 1
    binary = Path(table.binary.path)
    port = free_port()
    server = subprocess.Popen([str(binary), str(port)], stdout=subprocess.PIPE, text=True)
    OUT.mkdir(exist_ok=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        with tempfile.TemporaryDirectory(prefix="xtune-recipe-") as tmp:
            work = Path(tmp)
            plan = work / "rx.plan"
            plan.write_text(eng.plan_text(table, {bench.CONST: 0}, "/dev/shm/xtune.knobs"))
            with Services(["func"], funcs=probes(binary), window_ms=1, pid=server.pid) as svc:
                slo = load_text(
                    bench.SLO,
                    "recipe.yaml",
                    {"PID": str(server.pid), "PLAN": str(plan), "SHM": svc.signals_shm},
                )
                actuator = Actuator(svc.xrtd_socket, slo.knobs)
                reader = ShmFrameReader(svc.signals_shm, spin_s=0.0)
                started = time.time()
                try:
                    train, heldout = work / "train.xtrec", work / "heldout.xtrec"
                    grid, rounds = bench.GRID, bench.SWEEP_ROUNDS
                    bench.sweep(actuator, reader, grid, bench.TRAIN, port, train, SWEEP_S, 1, rounds)
                    bench.sweep(actuator, reader, grid, bench.HELDOUT, port, heldout, SWEEP_S * 0.7, 2)
                finally:
                    reader.close()
                    actuator.close(restore=True)
                recorded_s = time.time() - started
            model = dataplane_policy.train(train, heldout, bench.KNOB, OUT / "model.json")
        if not eng.spans_hold_original(server.pid, table):
            print("the server's text differs from its binary after the sweeps", file=sys.stderr)
            return 1
    finally:
        server.kill()
        server.wait()
    model.card.update(
        {
            "name": NAME,
            "recipe": f"models/recipes/{NAME}.py",
            # Not shipped (tens of MB at 1 ms windows): named, so a reader knows what they were.
            "recordings": ["train.xtrec"],
            "heldout_recordings": ["heldout.xtrec"],
            "host": {"kernel": platform.release(), "cpus": os.cpu_count()},
            "recorded_seconds": round(recorded_s, 1),
            "grid": grid,
            "sweep": {"train_regimes": bench.TRAIN, "heldout_regimes": bench.HELDOUT, "rounds": rounds},
            "cell_seconds": SWEEP_S,
        }
    )
    model.save(OUT / "model.json")
    (OUT / "CARD.md").write_text(card_markdown(model))
    print(f"{OUT}: labels {model.card['labels_robust']}, held-out {model.card['heldout']['accuracy']:.3f}")
    return 0


def card_markdown(model: TreeModel) -> str:
    c = model.card
    held = c["heldout"]
    values = ", ".join(str(v[0]) for v in model.classes)
    regimes = "\n".join(
        f"| {name} | {rate} | {flows} | {c['regimes'][name]} | {c['labels_robust'][name]} |"
        for name, (rate, flows) in c["sweep"]["train_regimes"].items()
    )
    scored = "\n".join(
        f"| {name} | {r['best']} | {r['chosen']} | {r['regret']:.2f} |" for name, r in held["regimes"].items()
    )
    return f"""# Model card: {NAME}

A decision tree (`kind: decision-tree`, model.json) that sets **`{bench.KNOB}`** — the dataplane
server's compiled-in `RX_BATCH_SIZE`, retuned in the running process through SIE — at every 1 ms
window. Its labels are measured, not stated: each load regime's best value by the client-visible
wait, among the values that keep 95 % of the regime's throughput.

## What it decides
One of {len(model.classes)} values: {values}. Fallback (signals outside the training range, or the
oldest wait past what the labelled values showed): {c["fallback"]}. The live policy moves to a
larger value at once and back only after `HOLD` windows in a row (dataplane_policy.py).

## Inputs
- `{model.features[0]}`: requests the server took per second (dp_round's `taken` × its rate), the
  arrival rate whatever value is in effect; the larger of a 3-window and a 32-window average.
- Watched, not split on: `{WATCH[0]}`.

xobserve's func family uprobes on the server's `serve_batch()` and `dp_round()`, filtered to the
server's pid, 1 ms windows.

## Training data
- Trained {c["trained"]} on this machine (Linux {c["host"]["kernel"]}, {c["host"]["cpus"]} vCPUs),
  {c["recorded_seconds"]:.0f} s of sweeps: every value of {c["grid"]} under each regime below, in
  {c["sweep"]["rounds"]} rounds, {c["cell_seconds"]:g} s per cell after 1 s of settling; each cell
  judged by its worse round (the 90th percentile over its windows of the oldest request's wait;
  throughput = payloads delivered per second).
- {c["samples"]} training windows; tree depth {c["depth"]}, {c["leaves"]} leaves.

| regime | req/s | flows | measured best | label (suits its 2 nearest regimes, ties to larger) |
|---|---|---|---|---|
{regimes}

## Accuracy
Training windows: {c["training_accuracy"]:.4f} (windows whose choice is their regime's measured best;
below 1 by design where the label leans larger than the best, as in the table above).
Held-out windows: {held["accuracy"]:.4f} over {held["windows"]} windows of regimes no sweep trained on;
mean regret {held["regret_mean"]:.2f} (objective of the chosen value over the best's).

| held-out regime | measured best | chosen most | regret |
|---|---|---|---|
{scored}

Decision: p50 {c["decision_us"]["p50"]:.2f} µs, p99 {c["decision_us"]["p99"]:.2f} µs (the compiled tree).

## Limits
- Trained for this server on this 2-vCPU host: its capacity per value sets the labels, so
  another host needs its own sweep (this recipe).
- The held-out regimes' best values lie between the labels of their neighbours; the labels lean
  to the larger value on purpose (a batch a step too small queues without bound).
- How it does live, against every static value and the per-phase oracle:
  experiments/dataplane/README.md (experiments/bench_adaptive_dataplane.py trains the same way).

## Rebuild
`.venv/bin/python models/recipes/{NAME}.py` (root, after `make build`; about 10 minutes).
"""


if __name__ == "__main__":
    sys.exit(main())

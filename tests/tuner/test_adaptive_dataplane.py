"""The adaptive loop end to end: a tree decides RX_BATCH_SIZE from BPF signals at 1 ms windows and
retunes the live, unmodified dataplane server through xrtd's sie-user backend, on a two-phase load;
halfway through the heavy phase its model file is replaced and the run swaps to the new model live.

The tree is written here (few flows → a small batch, many flows → a large one) because this test
is about the live path; training from measured landscapes is tested in test_adaptive_policy.py.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from xtune import paths
from xtune.config import load_text
from xtune.demo.sie_phase import CONST, Server, dataplane_spec
from xtune.host.services import Services
from xtune.knobs.actuator import Actuator
from xtune.learning.replay import replay_policy
from xtune.policies.tree import TreeModel
from xtune.sie import attach as eng
from xtune.sie.analyze import analyze
from xtune.sie.spec import load_spec
from xtune.signals.frames import ShmFrameReader
from xtune.signals.recording import RecordingReader
from xtune.trials.store import Store
from xtune.tuning.loop import Runner
from xtune.tuning.metrics import Metrics
from xtune.tuning.workload import Workload

FLOWS = "func.dp_round.active_flows.max"
SMALL, LARGE, LARGE_V2 = 8, 64, 32
SWAP_AT_S = 6.0  # from the run's start: the load's heavy phase runs from 4 to 8 s

SLO = """
name: adaptive-dataplane
objective: {minimize: p99(func.serve_batch.latency)}
knobs:
  - {name: rx_batch_size, backend: sie-user, target: "${PID}:${PLAN}", range: [8, 256]}
policy: {kind: tree, model: "${MODEL}", budget: 9000, window_ms: 1, settle_ms: 200, hold: 5,
         baseline_windows: 20}
guard: {watch_windows: 50, tolerance: 1000, on_exit: restore}
record: {path: "${REC}"}
workload:
  command: ["${LOADGEN}", "${PORT}", "4:3000:2", "4:20000:48", "60:3000:2"]
  ready_ms: 100
"""


def flow_tree(path: Path, large: int = LARGE) -> TreeModel:
    """active flows <= 5 → SMALL, else `large`; outside [0, 1000] flows → the fallback (SMALL).

    A round holds at most RX_BATCH_SIZE requests, so with SMALL the heavy phase shows up to SMALL
    active flows per round, the light phase (2 flows) at most 2."""
    nodes = [[0, 5.0, 1, 2, 0], [-1, 0.0, -1, -1, 0], [-1, 0.0, -1, -1, 1]]
    model = TreeModel([FLOWS], ["rx_batch_size"], [[SMALL], [large]], nodes, {}, None)
    model.guard = {"ranges": [[0.0, 1000.0]], "fallback": 0}
    model.save(path)
    return model


def test_tree_retunes_live_server_at_phase_change(tmp_path: Path) -> None:
    table = analyze(load_spec(dataplane_spec()))
    assert table.const(CONST).tunable, table.const(CONST).refusals
    binary = Path(table.binary.path)
    model = flow_tree(tmp_path / "tree.json")
    rec = tmp_path / "live.xtrec"
    server = Server(binary)
    try:
        with tempfile.TemporaryDirectory(prefix="xtune-adaptive-") as tmp:
            plan = Path(tmp) / "rx.plan"
            plan.write_text(eng.plan_text(table, {CONST: 0}, "/dev/shm/xtune.knobs"))
            gauge = f"{binary}:dp_round:arg0/32=active_flows"
            with Services(["func"], funcs=[f"{binary}:serve_batch", gauge], window_ms=1) as svc:
                variables = {
                    "PID": str(server.proc.pid),
                    "PLAN": str(plan),
                    "MODEL": str(tmp_path / "tree.json"),
                    "REC": str(rec),
                    "LOADGEN": str(paths.binary("dataplane-loadgen")),
                    "PORT": str(server.port),
                }
                slo = load_text(SLO, "adaptive.yaml", variables)
                metrics = Metrics(slo.name)
                actuator = Actuator(svc.xrtd_socket, slo.knobs)
                reader = ShmFrameReader(svc.signals_shm)
                assert slo.workload is not None
                runner = Runner(
                    slo,
                    actuator,
                    reader,
                    Store(f"sqlite:///{tmp_path / 't.db'}"),
                    metrics,
                    Workload(slo.workload),
                )
                # A live upgrade as an operator does it: the new model renamed over the file.
                swap = threading.Timer(SWAP_AT_S, flow_tree_over, (tmp_path / "tree.json",))
                swap.start()
                try:
                    runner.run()
                finally:
                    swap.cancel()
                    runner.close()
                    reader.close()
                    metrics.close()
        assert eng.spans_hold_original(server.proc.pid, table), "text not restored after the run"
        assert server.proc.poll() is None, "the server died"
    finally:
        server.close()

    recorded = list(RecordingReader(rec).decisions())
    (swapped,) = [d for d in recorded if d.policy == "swap"]
    at = int(swapped.extra["seq"])
    decisions = [d for d in recorded if d.policy == "tree"]
    applied = [
        (int(d.extra["seq"]), int(d.values["rx_batch_size"])) for d in decisions if d.extra.get("applied")
    ]
    before = [v for seq, v in applied if seq < at]
    after = [v for seq, v in applied if seq >= at]
    assert SMALL in before and LARGE in before, f"the tree never followed the load: {applied}"
    assert SMALL in before[: before.index(LARGE)], "the light phase should run with the small batch first"
    assert LARGE not in after and LARGE_V2 in after, f"the new model did not take over at {at}: {applied}"
    assert after[-1] == SMALL, "back to the small batch when the load is light again"
    assert all("inputs" in d.extra and FLOWS in d.extra["inputs"] for d in decisions)
    # No tick missed: every frame was decided, the swap's own included, by the model in effect —
    # the replay, which swaps models where the recording says, makes the same decisions.
    replayed = replay_policy(rec, model, hold=5)
    assert replayed.identical, replayed.differences


def flow_tree_over(path: Path) -> None:
    flow_tree(path.with_name("tree-v2.json"), LARGE_V2)
    os.replace(path.with_name("tree-v2.json"), path)

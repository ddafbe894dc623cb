"""A tree trained from a recording of real signals reproduces the recorded decisions,
compiled to straight-line code."""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import Lab
from xtune import paths
from xtune.config import load_text
from xtune.knobs.actuator import Actuator
from xtune.learning.replay import replay_policy
from xtune.learning.train import dataset, train_tree
from xtune.policies.tree import TreeModel, TreePolicy
from xtune.signals.frames import ShmFrameReader
from xtune.signals.recording import Decision, RecordingReader, RecordingWriter
from xtune.trials.store import Store
from xtune.tuning.loop import FramePump, Runner
from xtune.tuning.metrics import Metrics
from xtune.tuning.model_file import ModelFile
from xtune.tuning.workload import Workload

FEATURES = ["tcp.srtt.p99", "func.bulk_chunk.rate"]

TREE_SLO = """
name: tree-live
objective: {minimize: p99(tcp.srtt)}
knobs:
  - {name: rcv_buf_max, backend: sysctl, target: "net.ipv4.tcp_rmem[2]", netns: "${RECEIVER_NETNS}",
     range: [8192, 33554432]}
policy: {kind: tree, model: "${MODEL}", budget: 15, window_ms: 100, settle_ms: 500, baseline_windows: 3}
record: {path: "${REC}"}
workload:
  command: ["${BULK}", --server-netns, "${RECEIVER_NETNS}", --client-netns, "${SENDER_NETNS}",
            --addr, "${RECEIVER_ADDR}"]
"""


def expert(values: dict[str, float], bounds: tuple[float, float]) -> int:
    """The rule the recording's decisions come from: shrink the buffer as the RTT grows. Its
    thresholds are the recording's own RTT terciles, so every decision occurs on a host of any speed."""
    p99 = values.get("tcp.srtt.p99", 0.0)
    if p99 > bounds[1]:
        return 65536
    if p99 > bounds[0]:
        return 262144
    return 4194304


def terciles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 3], ordered[2 * len(ordered) // 3]


def record(lab: Lab, path: Path) -> int:
    """Real frames while the bulk flow runs under three receive limits, then the rule's decisions."""
    frames: list[tuple[bytes, dict[str, float]]] = []
    with ShmFrameReader(lab.svc.signals_shm) as reader:
        for rmem in (33554432, 1048576, 65536):
            subprocess.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    lab.net.receiver,
                    "sysctl",
                    "-qw",
                    f"net.ipv4.tcp_rmem=4096 131072 {rmem}",
                ],
                check=True,
            )
            flow = subprocess.Popen(
                [lab.bulk, "--server-netns", lab.net.path(lab.net.receiver)]
                + ["--client-netns", lab.net.path(lab.net.sender), "--addr", lab.net.receiver_addr]
            )
            try:
                end = time.monotonic() + 2.5
                while time.monotonic() < end:
                    frame = reader.poll(1.0)
                    assert frame is not None, "xobserve published no frame for 1 s"
                    values = {k: v for k, v in frame.values.items() if k not in frame.empty}
                    frames.append((frame.raw, values))
            finally:
                flow.terminate()
                flow.wait()
        catalog = reader.catalog
    assert catalog is not None
    bounds = terciles([values.get("tcp.srtt.p99", 0.0) for _, values in frames])
    with RecordingWriter(path) as rec:
        rec.append_catalog(catalog)
        for raw, values in frames:
            rec.append_frame(raw)
            rec.append_decision(Decision("expert", {"rcv_buf_max": expert(values, bounds)}, "rule"))
    return len(frames)


def test_tree_reproduces_recorded_decisions(lab: Lab, tmp_path: Path) -> None:
    rec = tmp_path / "run.xtrec"
    n = record(lab, rec)
    model_path = tmp_path / "tree.json"
    model = train_tree([rec], ["rcv_buf_max"], model_path, FEATURES)
    data = dataset([rec], ["rcv_buf_max"], FEATURES)
    assert len(data.labels) == n and len(set(data.labels)) == 3, "the recording must exercise every decision"

    policy = TreePolicy(TreeModel.load(model_path))
    source = model.source()
    assert "for " not in source and "while " not in source  # straight-line: nested ifs only
    agree = sum(
        policy.decide(dict(zip(data.features, row, strict=True)))["rcv_buf_max"] == label[0]
        for row, label in zip(data.rows, data.labels, strict=True)
    )
    assert agree / n >= 0.99, f"{agree}/{n} decisions reproduced"
    assert model.card["samples"] == n and model.card["training_accuracy"] >= 0.99
    # `xtune train` says what it fitted in a sentence, not the card's dict.
    args = [str(paths.ROOT / ".venv/bin/xtune"), "train", str(rec), "--knob", "rcv_buf_max"]
    args += ["--out", str(tmp_path / "cli.json"), *(a for f in FEATURES for a in ("--feature", f))]
    said = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    sentence = rf"tree depth \d+, \d+ leaves from {n} windows; training accuracy \d+\.\d %"
    assert re.fullmatch(rf"{re.escape(str(tmp_path / 'cli.json'))}: {sentence}\n", said), said

    # Live: the tree decides every frame in the loop and writes through xrtd's shared table.
    slo = load_text(
        TREE_SLO, "tree.yaml", lab.variables(MODEL=str(model_path), REC=str(tmp_path / "live.xtrec"))
    )
    store = Store(f"sqlite:///{tmp_path / 'trials.db'}")
    actuator = Actuator(lab.svc.xrtd_socket, slo.knobs)
    reader = ShmFrameReader(lab.svc.signals_shm)
    assert slo.workload is not None
    runner = Runner(slo, actuator, reader, store, Metrics(slo.name), Workload(slo.workload))
    try:
        runner.run()
        assert runner.pump.decisions >= 1
        time.sleep(0.2)  # xrtd applies within its poll period
        applied = actuator.read_applied()["rcv_buf_max"]
        assert applied in (65536, 262144, 4194304)
        assert lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_rmem").split()[2] == str(applied)
    finally:
        runner.close()
        reader.close()
    live = list(RecordingReader(tmp_path / "live.xtrec").decisions())
    assert any(d.policy == "tree" for d in live)
    # Offline, the same frames through the same model give the same decisions, frame for frame.
    replayed = replay_policy(tmp_path / "live.xtrec", TreeModel.load(model_path))
    assert replayed.identical, replayed.differences


def test_model_file_is_checked(tmp_path: Path) -> None:
    """Unit: a tampered node (child index pointing backwards) is refused, naming the node."""
    model = TreeModel(
        ["a"], ["k"], [[1], [2]], [[0, 0.5, 1, 2, 0], [-1, 0.0, -1, -1, 0], [-1, 0.0, -1, -1, 1]], {}
    )
    assert TreePolicy(model).decide({"a": 1.0}) == {"k": 2}
    model.nodes[0][2] = 0
    path = tmp_path / "bad.json"
    model.save(path)
    try:
        TreeModel.load(path)
    except ValueError as e:
        assert "bad.json: nodes[0][2]: child 0 is not after the node" in str(e)
    else:
        raise AssertionError("a malformed tree loaded")


def guarded_doc() -> dict:
    """A valid model document with a guard and a watch: the base of the bad documents below."""
    nodes = [[0, 0.5, 1, 2, 0], [-1, 0.0, -1, -1, 0], [-1, 0.0, -1, -1, 1]]
    model = TreeModel(["a"], ["k"], [[1], [2]], nodes, {}, None)
    model.guard = {
        "ranges": [[0.0, 1.0]],
        "fallback": 1,
        "watch": [{"signal": "dp.wait", "range": [0.0, 5.0], "drain": [[None, [0.0, 1.0]], [None, None]]}],
    }
    return json.loads(json.dumps(model.to_doc()))


BAD_DOCS = {
    # every rule of the file, each with the field the error must name
    r"nodes\[0\]\[3\]: child 0 is not after the node": lambda d: d["nodes"][0].__setitem__(3, 0),
    r"nodes\[0\]\[2\]: child 3 is not after the node and below 3": lambda d: d["nodes"][0].__setitem__(2, 3),
    r"nodes\[0\]\[0\]: feature 1 is not -1 \(a leaf\) or below 1": lambda d: d["nodes"][0].__setitem__(0, 1),
    r"nodes\[1\]\[4\]: class 2 is not below the 2 classes": lambda d: d["nodes"][1].__setitem__(4, 2),
    r"nodes\[0\]\[1\]: Input should be a finite number": lambda d: d["nodes"][0].__setitem__(1, math.nan),
    r"nodes\[0\]\[0\]: Input should be a valid integer": lambda d: d["nodes"][0].__setitem__(0, 0.5),
    r"nodes\[2\]: Tuple should have at most 5 items": lambda d: d["nodes"][2].append(0),
    r"classes\[1\]: needs one value per knob \['k'\]": lambda d: d["classes"][1].append(3),
    r"guard\.ranges: needs one \[lo, hi\] per feature \(1\), has 2": lambda d: d["guard"]["ranges"].append(
        [0, 1]
    ),
    r"guard\.ranges\[0\]: lo 2 is above hi 1": lambda d: d["guard"]["ranges"].__setitem__(0, [2.0, 1.0]),
    r"guard\.ranges\[0\]\[1\]: Input should be a finite number": lambda d: d["guard"]["ranges"][
        0
    ].__setitem__(1, math.inf),
    r"guard\.fallback: class 2 is not below the 2 classes": lambda d: d["guard"].__setitem__("fallback", 2),
    r"guard\.watch\[0\]\.signal: 'a \* b' is not a signal name": lambda d: d["guard"]["watch"][0].__setitem__(
        "signal", "a * b"
    ),
    r"guard\.watch\[0\]\.range\[0\]: Input should be a finite number": lambda d: d["guard"]["watch"][0][
        "range"
    ].__setitem__(0, -math.inf),
    r"guard\.watch\[0\]\.drain: Input should be a valid list": lambda d: d["guard"]["watch"][0].__setitem__(
        "drain", None
    ),
    r"version: Input should be 1, not 2": lambda d: d.__setitem__("version", 2),
    r"kind: Input should be 'decision-tree', not 'forest'": lambda d: d.__setitem__("kind", "forest"),
    r"knobs: missing": lambda d: d.pop("knobs"),
    r"guard\.note: not a field of this document": lambda d: d["guard"].__setitem__("note", ""),
}


@pytest.mark.parametrize("message", BAD_DOCS)
def test_each_rule_of_the_model_file_names_its_field(message: str) -> None:
    doc = guarded_doc()
    TreeModel.from_doc(doc, "m.json")
    BAD_DOCS[message](doc)
    with pytest.raises(ValueError, match=r"^m\.json: " + message):
        TreeModel.from_doc(doc, "m.json")


def test_tree_features_may_be_expressions() -> None:
    """A feature that is an expression (arrivals = requests per round × rounds) is evaluated per
    window; absent signals read as 0, as plain names do."""
    nodes = [[0, 20.0, 1, 2, 0], [-1, 0.0, -1, -1, 0], [-1, 0.0, -1, -1, 1]]
    model = TreeModel(["f.taken.mean * f.calls"], ["k"], [[2], [16]], nodes, {}, None)
    policy = TreePolicy(model)
    assert policy.decide({"f.taken.mean": 4.0, "f.calls": 3.0}) == {"k": 2}
    assert policy.decide({"f.taken.mean": 8.0, "f.calls": 4.0}) == {"k": 16}
    assert policy.inputs == [32.0]
    assert policy.decide({}) == {"k": 2}


def test_a_safe_direction_moves_that_way_at_once_and_back_after_hold() -> None:
    """prefer=larger in the card: a larger value takes effect in the window that chose it, a
    smaller one only after `hold` windows in a row; without a direction both wait."""
    nodes = [[0, 20.0, 1, 2, 0], [-1, 0.0, -1, -1, 0], [-1, 0.0, -1, -1, 1]]
    low, high = {"load": 10.0}, {"load": 30.0}
    safe = TreePolicy(TreeModel(["load"], ["k"], [[2], [16]], nodes, {"prefer": "larger"}, None), hold=3)
    assert [safe.decide(x)["k"] for x in (low, high)] == [2, 16]
    assert safe.reason == "tree, toward the safe side at once"
    assert [safe.decide(x)["k"] for x in (low, low, low)] == [16, 16, 2]
    plain = TreePolicy(TreeModel(["load"], ["k"], [[2], [16]], nodes, {}, None), hold=3)
    assert [plain.decide(x)["k"] for x in (low, high, high, high)] == [2, 2, 2, 16]
    with pytest.raises(ValueError, match="prefer must be"):
        TreePolicy(TreeModel(["load"], ["k"], [[2], [16]], nodes, {"prefer": "up"}, None))


def test_moving_back_takes_the_safest_choice_of_the_hold_windows() -> None:
    """Noise alternating between two smaller values still moves back after `hold` windows, to the
    larger of them; a window choosing the value in effect starts the count again."""
    nodes = [
        [0, 20.0, 1, 4, 0],
        [0, 10.0, 2, 3, 0],
        [-1, 0.0, -1, -1, 0],
        [-1, 0.0, -1, -1, 1],
        [-1, 0.0, -1, -1, 2],
    ]
    model = TreeModel(["load"], ["k"], [[2], [8], [16]], nodes, {"prefer": "larger"}, None)
    policy = TreePolicy(model, hold=3)
    two, eight, sixteen = {"load": 5.0}, {"load": 15.0}, {"load": 30.0}
    assert policy.decide(sixteen) == {"k": 16}
    assert [policy.decide(x)["k"] for x in (two, eight, sixteen, two, eight)] == [16] * 5
    assert policy.decide(two) == {"k": 8}
    assert "safest choice" in policy.reason


def test_a_replaced_model_file_that_does_not_load_is_refused_and_the_running_model_stays(
    tmp_path: Path,
) -> None:
    """Unit: Runner._swap_model on a real FramePump (not started) and a real ModelFile."""

    def model(knob: str, large: int) -> TreeModel:
        nodes = [[0, 0.5, 1, 2, 0], [-1, 0.0, -1, -1, 0], [-1, 0.0, -1, -1, 1]]
        return TreeModel(["a"], [knob], [[1], [large]], nodes, {})

    running = TreePolicy(model("k", 64))
    pump = FramePump(reader=None, window_ns=1_000_000, metrics=None, tree=running)  # type: ignore[arg-type]
    decisions: list[tuple[str, str]] = []
    store = SimpleNamespace(add_decision=lambda _exp, kind, _values, reason: decisions.append((kind, reason)))
    runner = SimpleNamespace(tree=running, pump=pump, store=store, experiment_id=1, progress=lambda *a: None)
    path = tmp_path / "model.json"
    model("k", 64).save(path)
    watched = ModelFile(path)

    def replace(text: str) -> None:
        staged = tmp_path / "staged.json"
        staged.write_text(text)
        staged.rename(path)
        assert watched.replaced()

    replace("{not json")
    Runner._swap_model(runner, watched)  # type: ignore[arg-type]
    assert pump._next_tree is None
    assert decisions[-1][0] == "swap" and "refused" in decisions[-1][1] and "cannot read" in decisions[-1][1]
    assert not watched.replaced(), "a refused file is tried again before it is replaced"

    other = tmp_path / "other.json"
    model("other_knob", 32).save(other)
    replace(other.read_text())
    Runner._swap_model(runner, watched)  # type: ignore[arg-type]
    assert pump._next_tree is None
    assert "refused" in decisions[-1][1] and "model decides ['other_knob']" in decisions[-1][1]

    good = tmp_path / "good.json"
    model("k", 32).save(good)
    replace(good.read_text())
    Runner._swap_model(runner, watched)  # type: ignore[arg-type]
    assert pump._next_tree is not None and pump._next_tree[0].model.classes == [[1], [32]]
    assert "refused" not in decisions[-1][1]

"""`tree`: a decision tree that maps the current signals to knob values, every window.

`xtune train` fits a scikit-learn DecisionTreeClassifier (each class is one joint setting of the
knobs) and saves its structure as JSON (`TreeModel.save`). For the millisecond loop the tree is
compiled to straight-line Python: nested `if x[i] <= t:` blocks returning a class index, with no
loop, no array and no library call per decision (measured in experiments/bench_tuner.py).
The generated source is built from numbers the loader checked (`tree_schema.TreeModelDoc`, published
as schemas/tree-model.schema.json), never from strings in the file.

A model may carry a guard (`TreeModel.guard`): the range of every feature seen in training and a
fallback setting. Signals outside that range are patterns the tree never saw, and it gives the
fallback instead of extrapolating. `TreePolicy` adds hysteresis (a new setting must win `hold`
windows in a row) and hands its state to a successor on a live model swap.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from xtune.config.expr import FeatureReader
from xtune.config.validation import first_problem
from xtune.policies.tree_schema import MODEL_VERSION, TreeModelDoc


@dataclass
class TreeModel:
    features: list[str]  # signal names or expressions over them, in the order the tree reads them
    knobs: list[str]
    classes: list[list[int]]  # class index -> knob values (same order as knobs)
    # Nodes: [feature, threshold, left, right, class]; leaves have feature -1.
    nodes: list[list[float]]
    card: dict[str, Any]
    # {"ranges": [[lo, hi] per feature], "fallback": class index, optional "watch": [{"signal",
    # "range", optional "drain"}] (signals outside the tree, watched for a range; drain[c][k]: the
    # [lo, hi] setting c showed where setting k is best, or null)}; None: no guard.
    guard: dict[str, Any] | None = None

    @classmethod
    def from_sklearn(
        cls,
        tree: Any,
        features: Sequence[str],
        knobs: Sequence[str],
        classes: Sequence[Sequence[int]],
        card: dict,
    ) -> TreeModel:
        t = tree.tree_
        nodes = []
        for i in range(t.node_count):
            leaf = t.children_left[i] == -1
            label = int(tree.classes_[int(t.value[i][0].argmax())])
            nodes.append(
                [
                    -1 if leaf else int(t.feature[i]),
                    0.0 if leaf else float(t.threshold[i]),
                    int(t.children_left[i]),
                    int(t.children_right[i]),
                    label,
                ]
            )
        return cls(list(features), list(knobs), [list(map(int, c)) for c in classes], nodes, card)

    def to_doc(self) -> dict[str, Any]:
        """The model as the JSON document `save` writes (also recorded at a live swap)."""
        doc = {
            "version": MODEL_VERSION,
            "kind": "decision-tree",
            "features": self.features,
            "knobs": self.knobs,
            "classes": self.classes,
            "nodes": self.nodes,
            "card": self.card,
        }
        if self.guard is not None:
            doc["guard"] = self.guard
        return doc

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_doc(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> TreeModel:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: cannot read the tree model: {e}") from e
        return cls.from_doc(doc, str(path))

    @classmethod
    def from_doc(cls, doc: Any, where: str) -> TreeModel:
        """A model from its JSON document, checked (`TreeModelDoc`); errors name `where` it came
        from and the field, e.g. `model.json: nodes[3][2]: child 1 is not after the node`."""
        try:
            TreeModelDoc.model_validate(doc)
        except ValidationError as e:
            raise ValueError(f"{where}: {first_problem(e)}") from e
        return cls(
            doc["features"], doc["knobs"], doc["classes"], doc["nodes"], doc.get("card", {}), doc.get("guard")
        )

    def source(self) -> str:
        """Straight-line Python for `decide(x) -> class index`."""
        lines = ["def decide(x):"]

        def emit(i: int, depth: int) -> None:
            feature, threshold, left, right, label = self.nodes[i]
            pad = "    " * depth
            if feature == -1:
                lines.append(f"{pad}return {int(label)}")
                return
            lines.append(f"{pad}if x[{int(feature)}] <= {float(threshold)!r}:")
            emit(int(left), depth + 1)
            lines.append(f"{pad}else:")
            emit(int(right), depth + 1)

        emit(0, 1)
        return "\n".join(lines) + "\n"

    def compile(self) -> Callable[[Sequence[float]], int]:
        namespace: dict[str, Any] = {}
        exec(compile(self.source(), "<xtune-tree>", "exec"), {"__builtins__": {}}, namespace)  # noqa: S102
        return namespace["decide"]


@dataclass
class PolicyState:
    """What a policy carries from window to window; handed over on a live model swap."""

    current: int | None = None  # class index in effect
    candidate: int | None = None  # class index waiting out the hysteresis
    streak: int = 0  # windows the candidate has won in a row
    out_of_range: bool = False  # the last window was outside the training ranges
    windows: int = 0
    tripped: bool = False  # a watched signal left its range; the fallback holds
    clear: int = 0  # windows in a row since then with every watched signal present and in range


class TreePolicy:
    """Per-window decisions from a compiled tree; `decide` is the fast path.

    `hold` windows in a row must choose a new setting before it replaces the current one (1: every
    window's choice takes effect). Outside the training ranges the guard's fallback is chosen, and
    takes effect at once: an unseen pattern is no reason to wait. A watched signal out of its range
    gives the fallback at once too, and the fallback then holds until the watched signals have
    been back in range for `hold` windows that have them: a server that fell behind shows low load
    signals while it catches up (windows with no call have none), and returning to the tree's
    choice in those windows puts it behind again.

    A model trained with a safe direction (card `prefer`: "larger" or "smaller") moves that way at
    once, and back only after `hold` windows in a row chose the unsafe side of the current setting,
    then to the safest of their choices: a value a step on the unsafe side queues without bound
    under rising load, one a step on the safe side costs a little while the load falls. (Waiting
    for `hold` equal choices would never move back where noise alternates between two smaller
    values.)
    """

    name = "tree"

    def __init__(self, model: TreeModel, hold: int = 1, state: PolicyState | None = None) -> None:
        if hold < 1:
            raise ValueError(f"hold must be at least 1 window, not {hold}")
        self.model = model
        self.hold = hold
        self._decide = model.compile()
        self._read = FeatureReader(model.features)
        self._values = [dict(zip(model.knobs, c, strict=True)) for c in model.classes]
        guard = model.guard
        self._ranges = [(float(lo), float(hi)) for lo, hi in guard["ranges"]] if guard else None
        self._fallback = int(guard["fallback"]) if guard else -1
        self._watch = [
            (w["signal"], float(w["range"][0]), float(w["range"][1])) for w in (guard or {}).get("watch", [])
        ]
        # (signal, the upper end of drain[c][k] or None) for the moves from class c to class k
        self._drain = [(w["signal"], w["drain"]) for w in (guard or {}).get("watch", []) if "drain" in w]
        prefer = model.card.get("prefer")
        if prefer not in (None, "larger", "smaller"):
            raise ValueError(f"model card: prefer must be larger or smaller, not {prefer!r}")
        self._sign = {"larger": 1, "smaller": -1}.get(prefer or "", 0)
        self.state = state if state is not None else PolicyState()
        self.inputs: list[float] = []  # the feature vector of the last decision
        self.reason = ""

    def take_over(self, previous: TreePolicy) -> None:
        """Continue from `previous` (a live model swap; cheap, runs on the frame path): the setting
        in effect, the hysteresis streak, the fallback state and the feature averages go on as if
        one model had run all along, where the new model knows the same settings and features."""
        if previous.model.knobs != self.model.knobs:
            raise ValueError(f"model decides {self.model.knobs}, the running one {previous.model.knobs}")
        state = PolicyState(**vars(previous.state))
        # Settings carry over by value: class indices differ between models.
        state.current = self._same_class(previous, state.current)
        state.candidate = self._same_class(previous, state.candidate)
        if state.candidate is None:
            state.streak = 0
        self.state = state
        self.hold = previous.hold
        self._read.take_over(previous._read)

    def _same_class(self, previous: TreePolicy, index: int | None) -> int | None:
        if index is None:
            return None
        setting = previous.model.classes[index]
        return self.model.classes.index(setting) if setting in self.model.classes else None

    def choose(self, x: Sequence[float]) -> int:
        """The class for one feature vector: the tree's, or the fallback outside the ranges."""
        ranges = self._ranges
        if ranges is not None:
            for v, (lo, hi) in zip(x, ranges, strict=True):
                if not lo <= v <= hi:
                    self.state.out_of_range = True
                    return self._fallback
            self.state.out_of_range = False
        return self._decide(x)

    def _watched(self, values: Mapping[str, float], empty: Container[str]) -> str:
        """The reason the fallback holds in this window, else "" (see the class docstring)."""
        st = self.state
        seen = 0
        for name, lo, hi in self._watch:
            v = values.get(name)
            if v is None or name in empty:
                continue
            if not lo <= v <= hi:
                st.tripped, st.clear = True, 0
                return f"{name} = {v:g} outside its range [{lo:g}, {hi:g}]: fallback"
            seen += 1
        if not st.tripped:
            return ""
        st.clear += 1 if seen else 0
        if st.clear >= self.hold:
            st.tripped = False
            return ""
        return f"watched signals back in range {st.clear} of {self.hold} windows: fallback holds"

    def _draining(self, values: Mapping[str, float], empty: Container[str], current: int, to: int) -> str:
        """Why leaving `current` for `to` must wait in this window, else "": a watched signal above
        what `current` showed in training under the loads `to` is best for (`drain`), i.e. the load
        that called for `current` left work behind that `to` would serve more slowly."""
        for name, drain in self._drain:
            r = drain[current][to]
            v = values.get(name)
            if r is None or v is None or name in empty:
                continue
            if v > r[1]:
                return (
                    f"holding: {name} = {v:g} above {r[1]:g}, the setting's range under the new one's loads"
                )
        return ""

    def _safer(self, a: int, b: int) -> bool:
        """Whether class a lies on the model's safe side of class b (every knob, one at least)."""
        if not self._sign:
            return False
        pairs = list(zip(self.model.classes[a], self.model.classes[b], strict=True))
        return all(self._sign * (x - y) >= 0 for x, y in pairs) and any(x != y for x, y in pairs)

    def _comparable(self, a: int, b: int) -> bool:
        return a == b or self._safer(a, b) or self._safer(b, a)

    def decide(self, values: Mapping[str, float], empty: Container[str] = ()) -> dict[str, int]:
        """Knob values for the signals of one window (absent signals read as 0); `empty` names the
        signals with no event in the window (a frame's `empty`), which a watch does not judge."""
        x = self._read(values)
        self.inputs = x
        watched = self._watched(values, empty) if self._watch else ""
        if watched:
            self.state.out_of_range = True
            chosen = self._fallback
        else:
            chosen = self.choose(x)
        st = self.state
        st.windows += 1
        if st.current is None or chosen == st.current or self.hold == 1 or st.out_of_range:
            self.reason = (watched or "out of training range: fallback") if st.out_of_range else "tree"
            st.current, st.candidate, st.streak = chosen, None, 0
        elif self._safer(chosen, st.current):
            self.reason = "tree, toward the safe side at once"
            st.current, st.candidate, st.streak = chosen, None, 0
        elif self._drain and (held := self._draining(values, empty, st.current, chosen)):
            # Windows "in a row" toward the new setting: one with work left behind starts them over.
            self.reason = held
            st.candidate, st.streak = None, 0
        elif self._sign and st.candidate is not None and self._comparable(chosen, st.candidate):
            # Another window on the unsafe side: the candidate is the safest choice of the streak.
            st.candidate = chosen if self._safer(chosen, st.candidate) else st.candidate
            st.streak += 1
            if st.streak >= self.hold:
                st.current, st.candidate, st.streak = st.candidate, None, 0
                self.reason = f"tree, {self.hold} windows on the unsafe side: their safest choice"
            else:
                self.reason = "hysteresis: holding"
        elif chosen == st.candidate:
            st.streak += 1
            if st.streak >= self.hold:
                st.current, st.candidate, st.streak = chosen, None, 0
                self.reason = f"tree, held {self.hold} windows"
        else:
            st.candidate, st.streak = chosen, 1
            self.reason = "hysteresis: holding"
        return self._values[st.current]

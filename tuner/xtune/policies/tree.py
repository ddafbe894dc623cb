"""`tree`: a decision tree that maps the current signals to knob values, every window.

`xtune train` fits a scikit-learn DecisionTreeClassifier (each class is one joint setting of the
knobs) and saves its structure as JSON (`TreeModel.save`). For the millisecond loop the tree is
compiled to straight-line Python: nested `if x[i] <= t:` blocks returning a class index, with no
loop, no array and no library call per decision (measured in experiments/bench_tuner.py).
The generated source is built from numbers the loader checked, never from strings in the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL_VERSION = 1


@dataclass
class TreeModel:
    features: list[str]  # signal names, in the order the compiled function reads them
    knobs: list[str]
    classes: list[list[int]]  # class index -> knob values (same order as knobs)
    # Nodes: [feature, threshold, left, right, class]; leaves have feature -1.
    nodes: list[list[float]]
    card: dict[str, Any]

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

    def save(self, path: str | Path) -> None:
        doc = {
            "version": MODEL_VERSION,
            "kind": "decision-tree",
            "features": self.features,
            "knobs": self.knobs,
            "classes": self.classes,
            "nodes": self.nodes,
            "card": self.card,
        }
        Path(path).write_text(json.dumps(doc, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> TreeModel:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: cannot read the tree model: {e}") from e
        if doc.get("version") != MODEL_VERSION or doc.get("kind") != "decision-tree":
            raise ValueError(f"{path}: not a version-{MODEL_VERSION} decision-tree model")
        model = cls(doc["features"], doc["knobs"], doc["classes"], doc["nodes"], doc.get("card", {}))
        model._check(str(path))
        return model

    def _check(self, where: str) -> None:
        n, nf, nc = len(self.nodes), len(self.features), len(self.classes)
        for i, (feature, threshold, left, right, label) in enumerate(self.nodes):
            ok = isinstance(feature, int) and isinstance(label, int) and 0 <= label < nc
            ok = ok and isinstance(threshold, (int, float)) and math.isfinite(threshold)
            if feature != -1:
                ok = ok and 0 <= feature < nf and i < left < n and i < right < n
            if not ok:
                raise ValueError(f"{where}: node {i} is malformed: {self.nodes[i]}")
        if any(len(c) != len(self.knobs) for c in self.classes):
            raise ValueError(f"{where}: every class needs one value per knob {self.knobs}")

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


class TreePolicy:
    """Per-window decisions from a compiled tree; `decide` is the fast path."""

    name = "tree"

    def __init__(self, model: TreeModel) -> None:
        self.model = model
        self._decide = model.compile()
        self._features = model.features
        self._values = [dict(zip(model.knobs, c, strict=True)) for c in model.classes]

    def decide(self, values: Mapping[str, float]) -> dict[str, int]:
        """Knob values for the signals of one window (absent signals read as 0)."""
        get = values.get
        return self._values[self._decide([get(f, 0.0) for f in self._features])]

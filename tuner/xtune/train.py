"""`xtune train`: fit a decision tree from recordings (signals -> the knob values decided then).

Every DECISION record of a recording that sets the chosen knobs becomes one sample: its features
are the values of the latest frame before it, its label the joint knob setting (one class per
distinct setting). The fitted tree is saved with a model card (data, accuracy on the training
recordings, depth) and compiled to straight-line code when loaded (policies/tree.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from xtune.policies.tree import TreeModel
from xtune.recording import Decision, RecordingReader, RecordType
from xtune.signals import Catalog, decode_frame


@dataclass
class Dataset:
    features: list[str]
    rows: list[list[float]]
    labels: list[tuple[int, ...]]


def dataset(
    recordings: Sequence[str | Path], knobs: Sequence[str], features: Sequence[str] | None
) -> Dataset:
    samples: list[tuple[dict[str, float], tuple[int, ...]]] = []
    for path in recordings:
        catalog: Catalog | None = None
        latest: dict[str, float] | None = None
        for rec in RecordingReader(str(path)).records():
            if rec.type == RecordType.CATALOG:
                catalog = Catalog.from_json(rec.payload)
            elif rec.type == RecordType.FRAME:
                frame = decode_frame(rec.payload, catalog)
                latest = {k: v for k, v in frame.values.items() if k not in frame.empty}
            elif rec.type == RecordType.DECISION and latest is not None:
                d = Decision.from_json(rec.payload)
                if all(k in d.values for k in knobs):
                    samples.append((latest, tuple(int(d.values[k]) for k in knobs)))
    if not samples:
        raise ValueError(f"no decisions about {list(knobs)} after a frame in {[str(p) for p in recordings]}")
    names = sorted(features) if features else sorted({n for values, _ in samples for n in values})
    rows = [[values.get(n, 0.0) for n in names] for values, _ in samples]
    return Dataset(list(names), rows, [label for _, label in samples])


def train_tree(
    recordings: Sequence[str | Path],
    knobs: Sequence[str],
    out: str | Path,
    features: Sequence[str] | None = None,
    max_depth: int = 8,
) -> TreeModel:
    from sklearn.tree import DecisionTreeClassifier

    data = dataset(recordings, knobs, features)
    classes = sorted(set(data.labels))
    y = [classes.index(label) for label in data.labels]
    tree = DecisionTreeClassifier(max_depth=max_depth, random_state=0).fit(data.rows, y)
    accuracy = float(tree.score(data.rows, y))
    card = {
        "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "recordings": [str(p) for p in recordings],
        "samples": len(y),
        "classes": len(classes),
        "depth": int(tree.get_depth()),
        "leaves": int(tree.get_n_leaves()),
        "training_accuracy": accuracy,
    }
    model = TreeModel.from_sklearn(tree, data.features, knobs, [list(c) for c in classes], card)
    model.save(out)
    return model

"""Every model shipped under models/ loads with the loop's checks, compiles to straight-line code,
has a card naming its features, and reproduces the card's accuracy on its shipped recordings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from xtune import paths
from xtune.learning.train import dataset
from xtune.policies.tree import TreeModel, TreePolicy

MODELS = paths.ROOT / "models"
SHIPPED = sorted(MODELS.glob("*/model.json"))
MAX_RECORDING_BYTES = 2 * 1024 * 1024


def test_a_model_ships() -> None:
    assert SHIPPED, f"no trained model under {MODELS}"


def walk(model: TreeModel, row: list[float]) -> int:
    """The tree read node by node from the JSON: the reference the compiled code must match."""
    i = 0
    while model.nodes[i][0] != -1:
        feature, threshold, left, right, _ = model.nodes[i]
        i = int(left) if row[int(feature)] <= threshold else int(right)
    return int(model.nodes[i][4])


def accuracy(model: TreeModel, recording: Path) -> tuple[float, int]:
    data = dataset([recording], model.knobs, model.features)
    assert data.features == model.features
    policy, decide = TreePolicy(model), model.compile()
    agree = 0
    for row, label in zip(data.rows, data.labels, strict=True):
        assert decide(row) == walk(model, row), f"{recording}: compiled tree differs from its nodes at {row}"
        got = policy.decide(dict(zip(data.features, row, strict=True)))
        agree += tuple(got[k] for k in model.knobs) == label
    return agree / len(data.labels), len(data.labels)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.parent.name for p in SHIPPED])
def test_model_loads_compiles_and_has_a_card(path: Path) -> None:
    model = TreeModel.load(path)  # the checks TreePolicy's loader applies (nodes, classes)
    source = model.source()
    assert "for " not in source and "while " not in source
    TreePolicy(model)
    assert model.features and model.knobs
    for key in ("trained", "samples", "training_accuracy", "depth", "leaves"):
        assert key in model.card, f"{path}: card lacks {key}"

    card = path.parent / "CARD.md"
    assert card.is_file(), f"{path}: no CARD.md beside the model"
    text = card.read_text()
    for name in model.features + model.knobs:
        assert f"`{name}`" in text, f"{card} does not name `{name}`"
    for section in ("## What it decides", "## Inputs", "## Training data", "## Accuracy", "## Limits"):
        assert section in text, f"{card} lacks {section}"
    recipe = paths.ROOT / model.card.get("recipe", "")
    assert recipe.is_file(), f"{path}: card names no existing recipe"


@pytest.mark.parametrize("path", SHIPPED, ids=[p.parent.name for p in SHIPPED])
def test_model_reproduces_its_card(path: Path) -> None:
    model = TreeModel.load(path)
    checked = 0
    held = model.card.get("heldout", {})
    runs = [(rec, model.card["training_accuracy"], model.card["samples"]) for rec in model.card["recordings"]]
    if "recording" in held:  # a model trained from sweeps is scored per regime, not per decision
        runs.append((held["recording"], held["accuracy"], held["samples"]))
    for name, stated, samples in runs:
        recording = path.parent / name
        if not recording.exists():
            continue
        assert recording.stat().st_size < MAX_RECORDING_BYTES, f"{recording} is too big to ship"
        got, n = accuracy(model, recording)
        assert n == samples and got == pytest.approx(stated), f"{recording}: {got} on {n}, card says {stated}"
        checked += 1
    if held:
        figure = re.search(r"Held-out windows: ([0-9.]+)", (path.parent / "CARD.md").read_text())
        assert figure and float(figure.group(1)) == pytest.approx(held["accuracy"], abs=5e-5)
    if checked == 0:
        pytest.skip(f"{path.parent.name}: no recording shipped, accuracy not re-checked")

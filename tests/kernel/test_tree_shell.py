"""The kernel case's policy compiled to shell (xtune.policies.tree_shell) decides as the model's
own compiled Python does, guard included, for integer features around every threshold."""

from __future__ import annotations

import itertools
import shutil
import subprocess

import pytest
from xtune.policies.tree import TreeModel
from xtune.policies.tree_shell import shell_source

# x0 <= 10.5 ? (x1 <= 200.25 ? 4 : 8) : 32, guard x0 in [2.5, 50.7], x1 in [-3.2, 900]: fallback 16.
MODEL = TreeModel(
    features=["a", "b"],
    knobs=["BLK_MAX_REQUEST_COUNT"],
    classes=[[4], [8], [32], [16]],
    nodes=[
        [0, 10.5, 1, 4, 0],
        [1, 200.25, 2, 3, 0],
        [-1, 0.0, -1, -1, 0],
        [-1, 0.0, -1, -1, 1],
        [-1, 0.0, -1, -1, 2],
    ],
    card={"depth": 2, "leaves": 3},
    guard={"ranges": [[2.5, 50.7], [-3.2, 900.0]], "fallback": 3},
)


def expected(x: list[int]) -> int:
    lo_hi = MODEL.guard["ranges"]
    if any(not lo <= v <= hi for v, (lo, hi) in zip(x, lo_hi, strict=True)):
        return MODEL.classes[MODEL.guard["fallback"]][0]
    return MODEL.classes[MODEL.compile()(x)][0]


@pytest.mark.parametrize("sh", ["busybox", "dash"])
def test_shell_policy_matches_the_model(sh: str) -> None:
    if not shutil.which(sh):
        pytest.skip(f"{sh} is missing")
    # The caller passes b before a: the source maps each feature to its argument.
    src = shell_source(MODEL, ["b", "a"])
    inputs = list(itertools.product([1, 2, 3, 10, 11, 50, 51], [-4, -3, 200, 201, 900, 901]))
    script = src + "".join(f"decide {b} {a}; echo $DECISION\n" for a, b in inputs)
    cmd = [sh, "sh", "-c", script] if sh == "busybox" else [sh, "-c", script]
    got = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()
    assert [int(g) for g in got] == [expected([a, b]) for a, b in inputs]


def test_shell_policy_needs_the_models_features() -> None:
    with pytest.raises(ValueError, match="features"):
        shell_source(MODEL, ["a"])

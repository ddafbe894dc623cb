"""The comparison that decides whether a run keeps its best values (tuning/confirm.py)."""

from __future__ import annotations

import pytest
from xtune.tuning.confirm import Confirmation, order


def test_pairs_take_turns_at_going_first() -> None:
    assert [order(i) for i in range(4)] == [("start", "best"), ("best", "start")] * 2


def test_the_bound_is_students_one_sided_lower_bound_of_the_mean_gain() -> None:
    c = Confirmation([10.0, 10.0, 10.0], [12.0, 13.0, 14.0], sign=1.0, confidence=0.9)
    # gains 2, 3, 4: mean 3, standard error 1 / sqrt(3), t(0.9, 2 df) = 1.8856
    assert c.mean_gain == 3.0
    assert c.lower_bound == pytest.approx(3.0 - 1.885618 / 3**0.5, rel=1e-6)
    assert c.holds


def test_a_minimized_objective_gains_when_it_falls() -> None:
    c = Confirmation([5.0, 5.0], [4.0, 4.5], sign=-1.0, confidence=0.9)
    assert c.gains == [1.0, 0.5] and c.mean_gain == 0.75


def test_gains_that_disagree_are_not_a_gain_with_confidence() -> None:
    c = Confirmation([0.0, 0.0, 0.0], [3.0, -1.0, 2.0], sign=1.0, confidence=0.9)
    assert c.mean_gain > 0 and not c.holds
    assert "no better than the start with confidence" in c.why_not({"x": 1})


def test_one_pair_decides_by_its_own_gain() -> None:
    assert Confirmation([1.0], [1.5], 1.0, 0.9).holds
    assert not Confirmation([1.0], [1.0], 1.0, 0.9).holds

"""The case studies' paired comparison: per-repetition ratios, their geometric mean and 95 % CI, and
the verdict read from the intervals (above 1 for an objective maximized, below 1 for one minimized)."""

from __future__ import annotations

import pytest
from cases.paired import better, compare, ratio_ci95


def test_ratio_is_the_geometric_mean_of_the_per_repetition_ratios() -> None:
    r = ratio_ci95({0: 200.0, 1: 50.0, 2: 120.0}, {0: 100.0, 1: 100.0, 2: 100.0})
    assert r["n"] == 3
    assert r["per_rep"] == [2.0, 0.5, 1.2]
    assert r["geomean"] == pytest.approx((2.0 * 0.5 * 1.2) ** (1 / 3))
    assert r["low"] < r["geomean"] < r["high"]
    # The interval is symmetric in the log: the inverse ratio's interval is the reciprocal.
    inv = ratio_ci95({0: 100.0, 1: 100.0, 2: 100.0}, {0: 200.0, 1: 50.0, 2: 120.0})
    assert inv["low"] == pytest.approx(1 / r["high"])
    assert inv["high"] == pytest.approx(1 / r["low"])


def test_only_repetitions_both_measured_are_paired() -> None:
    r = ratio_ci95({0: 110.0, 2: 120.0, 3: 99.0}, {0: 100.0, 1: 100.0, 2: 100.0})
    assert r["n"] == 2
    assert r["per_rep"] == pytest.approx([1.1, 1.2])


def test_one_pair_has_no_interval_and_beats_nothing() -> None:
    r = ratio_ci95({0: 300.0}, {0: 100.0})
    assert r["geomean"] == pytest.approx(3.0)
    assert r["low"] is None and r["high"] is None
    assert not better(r, maximize=True)
    empty = ratio_ci95({}, {0: 1.0})
    assert empty["n"] == 0 and empty["geomean"] is None and not better(empty, maximize=True)


def test_a_drift_shared_by_the_contenders_cancels_in_the_ratio() -> None:
    # Every repetition slower than the last (the host's caches, other tenants), b always 5 % ahead:
    # the means' intervals overlap, the paired ratio is 1.05 with no spread.
    drift = [1000.0, 800.0, 650.0, 500.0, 420.0]
    a = dict(enumerate(drift))
    b = {i: x * 1.05 for i, x in a.items()}
    r = ratio_ci95(b, a)
    assert r["geomean"] == pytest.approx(1.05)
    assert r["low"] == pytest.approx(1.05) and better(r, maximize=True)
    assert not better(r, maximize=False)


def test_verdict_follows_the_objective_direction() -> None:
    objectives = {
        "defaults": {0: 100.0, 1: 90.0, 2: 110.0},
        "profile": {0: 101.0, 1: 88.0, 2: 112.0},  # within the noise of the defaults
        "xtune-bo": {0: 120.0, 1: 109.0, 2: 131.0},  # ahead of both in every repetition
    }
    paired, verdict = compare(objectives, maximize=True)
    assert set(paired["xtune-bo"]) == {"defaults", "profile"}
    assert verdict["beats_defaults"] == ["xtune-bo"]
    assert verdict["beats_every_other"] == ["xtune-bo"]
    # The same figures as latencies (minimized): xtune-bo is now behind both, and profile within the
    # noise of the defaults, so no one is ahead.
    paired, verdict = compare(objectives, maximize=False)
    assert better(paired["defaults"]["xtune-bo"], maximize=False)
    assert verdict["beats_defaults"] == [] and verdict["beats_every_other"] == []


def test_a_contender_alone_beats_no_one() -> None:
    paired, verdict = compare({"defaults": {0: 1.0, 1: 2.0}}, maximize=True)
    assert paired == {"defaults": {}}
    assert verdict["beats_defaults"] == [] and verdict["beats_every_other"] == []

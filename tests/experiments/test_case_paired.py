"""The case studies' paired comparison: per-repetition ratios, their geometric mean and 95 % CI, and
the verdict read from the intervals (above 1 for an objective maximized, below 1 for one minimized)
with Holm's correction over a case's pairwise tests, among the contenders that meet its SLO lines."""

from __future__ import annotations

import math

import pytest
from cases.paired import better, compare, holm, ratio_ci95
from cases.slo_lines import check, excluded
from xtune.config import expr


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
    # Its half-width, in percent, is the factor from the geometric mean to either end, both ways.
    assert 1 + r["half_width_pct"] / 100 == pytest.approx(r["high"] / r["geomean"])
    assert r["half_width_pct"] == pytest.approx(inv["half_width_pct"])


def test_only_repetitions_both_measured_are_paired() -> None:
    r = ratio_ci95({0: 110.0, 2: 120.0, 3: 99.0}, {0: 100.0, 1: 100.0, 2: 100.0})
    assert r["n"] == 2
    assert r["per_rep"] == pytest.approx([1.1, 1.2])


def test_one_pair_has_no_interval_and_beats_nothing() -> None:
    r = ratio_ci95({0: 300.0}, {0: 100.0})
    assert r["geomean"] == pytest.approx(3.0)
    assert r["low"] is None and r["high"] is None and r["half_width_pct"] is None
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


def test_holm_multiplies_the_k_th_smallest_p_by_the_tests_left_and_keeps_the_order() -> None:
    q = holm({("a", "b"): 0.01, ("a", "c"): 0.04, ("b", "c"): 0.03, ("c", "d"): 0.5})
    assert q[("a", "b")] == pytest.approx(0.04)  # 4 x 0.01
    assert q[("b", "c")] == pytest.approx(0.09)  # 3 x 0.03
    assert q[("a", "c")] == pytest.approx(0.09)  # 2 x 0.04 = 0.08, raised to the one before it
    assert q[("c", "d")] == pytest.approx(0.5)


def test_a_borderline_pair_passes_at_95_percent_alone_but_not_corrected() -> None:
    # a over the defaults: +2 % with a spread that puts p between 0.05 / 3 and 0.05; two more
    # contenders make three tests, whose other p-values are larger.
    logs = [0.035, 0.005, 0.030, 0.002, 0.028]
    objectives = {
        "defaults": dict.fromkeys(range(5), 100.0),
        "a": {i: 100.0 * math.exp(x) for i, x in enumerate(logs)},
        "b": {0: 104.0, 1: 96.0, 2: 101.0, 3: 99.0, 4: 100.0},
    }
    paired, verdict = compare(objectives, maximize=True)
    r = paired["a"]["defaults"]
    assert 0.05 / 3 < r["p"] < 0.05 and better(r, maximize=True), r
    assert r["p_holm"] > 0.05
    assert verdict["tests"] == 3
    assert verdict["uncorrected"]["beats_defaults"] == ["a"]
    assert verdict["beats_defaults"] == []


NET_LINES = [expr.parse_slo("bench.bulk_mbit_s >= 0.9 * baseline")]


def net_runs(p99: list[float], bulk: float) -> list[dict[str, float]]:
    return [{"bench.rr_p99_ms": p, "bench.bulk_mbit_s": bulk + 0.1 * i} for i, p in enumerate(p99)]


def test_a_better_objective_that_breaks_the_slo_does_not_win() -> None:
    # The network case: window scaling off gives the lowest p99 by holding the bulk to a third.
    runs = {
        "defaults": net_runs([71.0, 66.0, 75.0, 70.0, 72.0], 37.0),
        "paper-web-static": net_runs([40.3, 40.1, 40.5, 40.2, 40.4], 12.8),
        "xtune-bo": net_runs([57.5, 57.2, 57.8, 57.4, 57.6], 35.6),
    }
    objectives = {c: {i: r["bench.rr_p99_ms"] for i, r in enumerate(rs)} for c, rs in runs.items()}
    judged = check(NET_LINES, runs)
    assert judged["defaults"] == []  # the baseline itself is not judged
    assert judged["xtune-bo"][0]["holds"] and not judged["paper-web-static"][0]["holds"]
    assert judged["paper-web-static"][0]["runs_breaking"] == 5
    out = excluded(judged)
    assert list(out) == ["paper-web-static"]
    assert "bench.bulk_mbit_s >= 0.9 * baseline" in out["paper-web-static"], out
    assert "mean 13 over 5 runs against the bound 33.48" in out["paper-web-static"], out
    # Without the SLO the paper's profile beats every other; with it, xtune's BO does.
    _, plain = compare(objectives, maximize=False)
    assert plain["beats_every_other"] == ["paper-web-static"]
    paired, verdict = compare(objectives, maximize=False, excluded=out)
    assert verdict["excluded"] == out
    assert verdict["beats_defaults"] == ["xtune-bo"] and verdict["beats_every_other"] == ["xtune-bo"]
    assert verdict["tests"] == 1  # only the pair that meets the SLO is tested
    assert "p_holm" not in paired["paper-web-static"]["defaults"]

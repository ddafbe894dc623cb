"""The band of values around the original whose builds have its code shape
(tuner/xtune/sie/band.py), and what the analysis makes of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from xtune.sie import attach as eng
from xtune.sie.analyze import analyze
from xtune.sie.band import SIDE_BUILDS, edge, fit_values, validation_value
from xtune.sie.scope import ScopeError
from xtune.testing import sie_oracle as oracle


def _shapes(lo: int, hi: int):
    """`same` for a unit whose shape is the original's on [lo, hi], counting the builds."""
    built: list[int] = []

    def same(v: int) -> bool:
        built.append(v)
        return lo <= v <= hi

    return same, built


def test_edge_bisects_between_known_builds():
    # Known: 48 has the shape, 32 and 72 do not; the edges are 42 and 64 (= the original).
    same, built = _shapes(42, 64)
    known = {64: True, 48: True, 32: False, 128: False, 72: False}
    assert edge(64, 32, known, same) == 42 and built == [40, 44, 42, 41]
    assert edge(64, 128, known, same) == 64 and built[4:] == [68, 66, 65]
    assert known[41] is False and known[42] is True


def test_edge_stops_after_its_builds():
    # 1000 values away: SIDE_BUILDS bisection steps leave the edge at the farthest value known.
    same, built = _shapes(0, 700)
    known = {64: True, 1064: False}
    got = edge(64, 1064, known, same)
    assert len(built) == SIDE_BUILDS and got <= 700 and all(known[v] for v in built if v <= got)


def test_edge_reaches_a_limit_of_the_shape():
    same, built = _shapes(10, 200)
    assert edge(64, 128, {64: True, 128: True}, same) == 128 and built == []
    assert edge(64, 64, {64: True}, same) == 64 and built == []


def test_fit_and_validation_values_inside_the_band():
    assert fit_values(64, 63, 69, {}) == [64, 63, 69]
    # One end is the original: the known same-shape build nearest the middle of the other side.
    assert fit_values(64, 42, 64, {48: True, 44: True, 32: False}) == [64, 42, 48]
    assert fit_values(64, 42, 64, {}) == [64, 42, 53]
    assert validation_value(63, 69, [64, 63, 69]) == 65  # coprime to 64, 63 and 69
    assert validation_value(42, 64, [64, 42, 48]) == 53
    assert validation_value(2, 4, [2, 3, 4]) is None


def test_band_retuned(engine):
    """gcc -O3 unrolls backoff's doubling once per bit of K: 32 and 128 have other code, no
    multiple of 4..64 shares the original's. The band around 64 is found by bisection, fitted inside
    it, validated on a value no fit used; retuned to values inside it the binary prints what the
    rebuilds print, and the engine refuses values outside it."""
    c = oracle.run_case(oracle.case("backoff", "gcc", "-O3"))
    const = c.table.consts[0]
    assert c.verdict == "pass", c.detail
    lo, hi = const.min_value, const.max_value
    assert lo is not None and hi == 64 and 33 <= lo < 64 - 3, (lo, hi)
    assert all(lo <= v <= hi for v in const.values) and len(const.values) == 3, const.values
    assert any(
        "the band of K with the original's shape is" in n and "bisected with" in n for n in c.table.notes
    )
    assert len(set(c.probes) - set(const.values)) >= 2, c.probes
    for outside in (lo - 1, hi + 1):
        with pytest.raises(ScopeError, match="where the analysis holds"):
            const.check_value(outside)
    # The engine itself (from the plan) refuses the values just outside the band.
    t = oracle.Target(oracle.command(c.spec, Path(c.table.binary.path)))
    try:
        eng.attach(t.p.pid, c.table, ["K"])
        for outside in (lo - 1, hi + 1):
            with pytest.raises(eng.SieError):
                eng.set_value(t.p.pid, "K", outside)
        eng.set_value(t.p.pid, "K", lo)
        assert t.ask(oracle.INPUTS) == oracle.reference(c.spec, lo)
        eng.detach(t.p.pid)
    finally:
        t.close()


def test_band_of_identical_builds_refused():
    """budget at gcc -O3 depends on K / 7 only: 63..69 share the original's shape, and their builds
    are the same code, so there is nothing to retune; the refusal names the band."""
    const = analyze(oracle.case("budget", "gcc", "-O3").spec).consts[0]
    assert not const.tunable
    detail = next(r.detail for r in const.refusals if r.function == "compute")
    assert "the band of K with the original's shape is 63..69" in detail, detail
    assert "the same code" in detail, detail

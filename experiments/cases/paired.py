"""Contenders compared repetition by repetition: every repetition of an interleaved run measures all
of them back to back, so the ratio of two contenders' figures in the same repetition cancels what
drifts between repetitions (the shared host's load, the disk's caches) and their spread over the
repetitions is the test of a difference.

A ratio's summary is the geometric mean of the per-repetition ratios with a 95 % CI: the t interval
of the mean log ratio (`mean_ci95`), exponentiated, so the interval is the same whichever contender
is on top. A contender beats another with confidence when that interval lies wholly on the better
side of 1 (above it for an objective maximized, below it for one minimized).
"""

from __future__ import annotations

import math

from xtune.testing.stats import mean_ci95


def ratio_ci95(xs: dict[int, float], base: dict[int, float]) -> dict:
    """xs over base, each a repetition -> figure map; only repetitions both measured are paired."""
    reps = sorted(set(xs) & set(base))
    ratios = [xs[r] / base[r] for r in reps]
    s = mean_ci95([math.log(r) for r in ratios])
    mean, half = s["mean"], s["ci95"]
    return {
        "n": s["n"],
        "geomean": None if mean is None else math.exp(mean),
        "low": None if mean is None or half is None else math.exp(mean - half),
        "high": None if mean is None or half is None else math.exp(mean + half),
        "per_rep": ratios,
    }


def better(ratio: dict, maximize: bool) -> bool:
    """The ratio's interval lies wholly on the better side of 1 (no interval: not shown)."""
    if ratio["low"] is None:
        return False
    return ratio["low"] > 1 if maximize else ratio["high"] < 1


def compare(objectives: dict[str, dict[int, float]], maximize: bool) -> tuple[dict, dict]:
    """Every contender over every other (`paired[c][o]`: c / o), and the verdict: which contenders
    beat the defaults, and which beat every other contender, with confidence."""
    paired = {
        c: {o: ratio_ci95(xs, objectives[o]) for o in objectives if o != c} for c, xs in objectives.items()
    }
    ahead = {c: [o for o, r in over.items() if better(r, maximize)] for c, over in paired.items()}
    verdict = {
        "measure": "per repetition, a contender's objective over the other's; 95 % CI of the geometric mean",
        "beats_defaults": [c for c in paired if "defaults" in ahead[c]],
        "beats_every_other": [c for c in paired if paired[c] and len(ahead[c]) == len(paired[c])],
    }
    return paired, verdict

"""Contenders compared repetition by repetition: every repetition of an interleaved run measures all
of them back to back, so the ratio of two contenders' figures in the same repetition cancels what
drifts between repetitions (the shared host's load, the disk's caches) and their spread over the
repetitions is the test of a difference.

A ratio's summary is the geometric mean of the per-repetition ratios with a 95 % CI: the t interval
of the mean log ratio (`mean_ci95`), exponentiated, so the interval is the same whichever contender
is on top. A contender beats another with confidence when that interval lies wholly on the better
side of 1 (above it for an objective maximized, below it for one minimized).

The verdict makes one test per pair of contenders (the t test of the mean log ratio, two-sided,
the test whose 95 % interval that is), about 20 in a case of seven, so read at 5 % each some would
come out by chance. Its claims hold for the case's tests together: Holm–Bonferroni step-down over
the pairwise tests of a case (the k-th smallest p-value is compared with 5 % / (m - k + 1), m the
tests, stopping at the first that fails), so the chance that any claim of the case is wrong is at
most 5 %. Holm rather than Bonferroni-widened intervals: it claims everything Bonferroni does and
more, and the intervals shown stay the plain 95 % ones. Contenders that break the case's SLO lines
(`slo_lines.py`) are outside the tests: they cannot win, and they are not opponents a winner must
beat (a setting the SLO forbids is no alternative).
"""

from __future__ import annotations

import math
import statistics

from scipy.stats import t as student_t
from xtune.testing.stats import mean_ci95

ALPHA = 0.05  # family-wise, per case


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
        # The interval's reach either side of the geometric mean, in percent: a true ratio nearer 1
        # than this would, measured with this run's spread, most often not leave 1 out.
        "half_width_pct": None if half is None else 100 * (math.exp(half) - 1),
        "per_rep": ratios,
        "p": p_value([math.log(r) for r in ratios]),
    }


def p_value(logs: list[float]) -> float | None:
    """Two-sided p of the one-sample t test that the mean log ratio is 0 (None under 2 pairs)."""
    n = len(logs)
    if n < 2:
        return None
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    if sd == 0:  # every repetition the same ratio: certain unless that ratio is 1
        return 1.0 if mean == 0 else 0.0
    return float(2 * student_t.sf(abs(mean) / (sd / math.sqrt(n)), n - 1))


def holm(p: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """Holm-adjusted p-values (a test is a claim at family-wise ALPHA when its adjusted p <= ALPHA)."""
    m = len(p)
    out: dict[tuple[str, str], float] = {}
    running = 0.0
    for k, (pair, value) in enumerate(sorted(p.items(), key=lambda kv: kv[1])):
        running = max(running, min(1.0, (m - k) * value))
        out[pair] = running
    return out


def better(ratio: dict, maximize: bool) -> bool:
    """The ratio's interval lies wholly on the better side of 1 (no interval: not shown)."""
    if ratio["low"] is None:
        return False
    return ratio["low"] > 1 if maximize else ratio["high"] < 1


def compare(
    objectives: dict[str, dict[int, float]], maximize: bool, excluded: dict[str, str] | None = None
) -> tuple[dict, dict]:
    """Every contender over every other (`paired[c][o]`: c / o, with its p and Holm-adjusted p),
    and the verdict: which contenders beat the defaults, and which beat every other contender,
    with family-wise confidence; `excluded`: contenders that cannot win (name -> why)."""
    excluded = excluded or {}
    paired = {
        c: {o: ratio_ci95(xs, objectives[o]) for o in objectives if o != c} for c, xs in objectives.items()
    }
    eligible = [c for c in objectives if c not in excluded]
    tests = {
        (a, b): paired[a][b]["p"]
        for i, a in enumerate(eligible)
        for b in eligible[i + 1 :]
        if paired[a][b]["p"] is not None
    }
    adjusted = holm(tests)
    for (a, b), q in adjusted.items():
        paired[a][b]["p_holm"] = paired[b][a]["p_holm"] = q

    def ahead(c: str, o: str, corrected: bool) -> bool:
        r = paired[c][o]
        if corrected and not r.get("p_holm", 1.0) <= ALPHA:
            return False
        return better(r, maximize)

    def verdict_of(corrected: bool) -> tuple[list[str], list[str]]:
        beats_defaults = [
            c
            for c in eligible
            if c != "defaults" and "defaults" in objectives and ahead(c, "defaults", corrected)
        ]
        every = [
            c
            for c in eligible
            if len(eligible) > 1 and all(ahead(c, o, corrected) for o in eligible if o != c)
        ]
        return beats_defaults, every

    beats_defaults, beats_every_other = verdict_of(True)
    plain_defaults, plain_every = verdict_of(False)
    verdict = {
        "measure": "per repetition, a contender's objective over the other's; 95 % CI of the geometric mean",
        "correction": "Holm-Bonferroni over the case's pairwise tests, family-wise 5 %",
        "tests": len(tests),
        "excluded": dict(excluded),
        "beats_defaults": beats_defaults,
        "beats_every_other": beats_every_other,
        # The same read at 5 % per test, uncorrected: what the correction took away.
        "uncorrected": {"beats_defaults": plain_defaults, "beats_every_other": plain_every},
    }
    return paired, verdict

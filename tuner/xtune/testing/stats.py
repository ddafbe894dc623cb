"""Statistics of repeated measurements: a percentile of samples, mean and 95 % confidence interval."""

from __future__ import annotations

import math
import statistics

from scipy.stats import t


def mean_ci95(xs: list[float]) -> dict[str, float | int | None]:
    n = len(xs)
    if n == 0:
        return {"n": 0, "mean": None, "ci95": None}
    mean = statistics.fmean(xs)
    ci = t.ppf(0.975, n - 1) * statistics.stdev(xs) / math.sqrt(n) if n > 1 else math.inf
    return {"n": n, "mean": mean, "ci95": ci if math.isfinite(ci) else None}


def percentile(samples: list[float], q: float) -> float:
    """The sample at rank q (0..1) of the sorted samples (nearest rank, no interpolation)."""
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]

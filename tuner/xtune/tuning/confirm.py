"""Whether the best trial's values beat the start's: both measured again, in turns.

The best trial is the largest of several noisy measurements, so measured again it tends to fall
back (the winner's curse), and a host drifts between a run's baseline and its end: comparing the
best measured at the end with the baseline measured at the start credits the drift to the values.
So the start's values and the best are measured in turns (start, best; best, start; start, best;
...: a steady drift favours each side in every other pair and cancels), and the best values are
kept only when the one-sided lower confidence bound of the mean gain over the pairs is above zero
(Student's t over the pairs' differences); with one pair, when that pair's gain is.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from scipy.stats import t


def order(pair: int) -> tuple[str, str]:
    """Which values a pair measures first: the start's in even pairs, the best in odd ones."""
    return ("start", "best") if pair % 2 == 0 else ("best", "start")


@dataclass
class Confirmation:
    start: list[float]  # the start's objective, one mean per pair
    best: list[float]  # the best values' objective, one mean per pair
    sign: float  # +1 maximize, -1 minimize
    confidence: float

    @property
    def gains(self) -> list[float]:
        """Per pair, how much better the best values did (in the objective's units)."""
        return [self.sign * (b - s) for s, b in zip(self.start, self.best, strict=True)]

    @property
    def mean_gain(self) -> float:
        return statistics.fmean(self.gains)

    @property
    def lower_bound(self) -> float:
        """The one-sided lower confidence bound of the mean gain (the gain itself for one pair)."""
        gains = self.gains
        if len(gains) < 2:
            return gains[0]
        sem = statistics.stdev(gains) / math.sqrt(len(gains))
        return self.mean_gain - float(t.ppf(self.confidence, len(gains) - 1)) * sem

    @property
    def holds(self) -> bool:
        return self.lower_bound > 0

    def why_not(self, best: dict) -> str:
        n = len(self.gains)
        bound = "" if n < 2 else f", its {self.confidence:.0%} lower bound {self.lower_bound:+.4g}"
        return (
            f"the best trial ({best}) measured again in turns with the start's values ({n} "
            f"pair{'s' if n != 1 else ''}) gained {self.mean_gain:+.4g} a pair{bound}: no better "
            "than the start with confidence, the start's values are kept"
        )

    def as_dict(self) -> dict:
        return {
            "start": self.start,
            "best": self.best,
            "mean_gain": self.mean_gain,
            "lower_bound": self.lower_bound,
            "confidence": self.confidence,
            "holds": self.holds,
        }

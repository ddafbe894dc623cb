"""The guard: SLO lines checked against the baseline's noise after every change.

Before the first change the loop measures a baseline (several windows at the starting values):
for each SLO line the median of its left side and its noise, the median absolute deviation
scaled to a standard deviation (1.4826 MAD): robust to a stray window, e.g. another flow on the
host entering a host-wide quantile. `baseline` on the right of a line is that median. After a
change the guard watches the next `watch_windows` windows; a window violates a line when it is
outside the bound by more than the baseline's noise (`tolerance` of those deviations, and at
least `min_margin` of the bound). `violations` such
windows trip the guard, so a harmful value is rolled back at most `watch_windows` windows after
the settle time that follows the change.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from xtune.config.expr import Comparison, MissingSignal, evaluate
from xtune.config.schema import Guard as GuardConfig


@dataclass(frozen=True)
class LineBaseline:
    median: float
    std: float  # robust: 1.4826 * median absolute deviation
    bound: float  # the right side, with `baseline` = mean
    slack: float  # how far past the bound still counts as noise


@dataclass(frozen=True)
class Violation:
    line: str
    value: float
    bound: float
    slack: float


@dataclass
class Guard:
    lines: Sequence[Comparison]
    config: GuardConfig
    baseline: list[LineBaseline] = field(default_factory=list)
    _watching: int = 0
    _seen: int = 0
    _bad: int = 0

    def set_baseline(self, windows: Sequence[Mapping[str, float]]) -> None:
        """Measure each line's left side over the baseline windows."""
        self.baseline = []
        for line in self.lines:
            samples = []
            for values in windows:
                try:
                    samples.append(evaluate(line.left, values))
                except MissingSignal:
                    continue
            if len(samples) < 2:
                raise ValueError(
                    f"SLO line {line.text!r}: its signals were missing from the baseline windows"
                )
            median = statistics.median(samples)
            std = 1.4826 * statistics.median(abs(x - median) for x in samples)
            bound = evaluate(line.right, {}, median)
            slack = max(self.config.tolerance * std, self.config.min_margin * abs(bound))
            self.baseline.append(LineBaseline(median, std, bound, slack))

    def violations(self, values: Mapping[str, float]) -> list[Violation]:
        """Lines this window breaks beyond the baseline's noise (missing signals: not judged)."""
        out = []
        for line, base in zip(self.lines, self.baseline, strict=True):
            try:
                value = evaluate(line.left, values)
            except MissingSignal:
                continue
            shifted = base.bound + base.slack if line.op in ("<=", "<") else base.bound - base.slack
            if not line.holds(value, shifted):
                out.append(Violation(line.text, value, base.bound, base.slack))
        return out

    def margins(self, values: Mapping[str, float]) -> dict[str, float]:
        """Relative margin of each line (positive inside the SLO); lines with missing signals left out."""
        out = {}
        for line, base in zip(self.lines, self.baseline, strict=True):
            try:
                out[line.text] = line.margin(evaluate(line.left, values), base.bound)
            except MissingSignal:
                continue
        return out

    def watch(self) -> None:
        """A change was applied (and settled): watch the next windows."""
        self._watching = self.config.watch_windows
        self._seen = self._bad = 0

    @property
    def watching(self) -> bool:
        return self._seen < self._watching

    def observe(self, values: Mapping[str, float]) -> list[Violation] | None:
        """Feed one window; return the violations when the guard trips, else None."""
        bad = self.violations(values)
        if self.watching:
            self._seen += 1
        if bad:
            self._bad += 1
            if self._bad >= self.config.violations:
                self._bad = 0
                return bad
        elif not self.watching:
            self._bad = 0
        return None


@dataclass
class ChangeWatch:
    """The guard over a policy that changes knobs by itself (a tree, every window): each change is
    watched like a trial, and one that held the SLO through its whole watch becomes the last good
    values, where a later breach rolls back to (not to the baseline: the compiled value may be the
    worst one for the load of the moment)."""

    guard: Guard
    values: dict[str, Any]  # in effect now; the baseline's values are good
    settled: bool = True  # `values` held the SLO for a whole watch

    def observe(self, current: Mapping[str, Any], window: Mapping[str, float]) -> tuple[str, list[Violation]]:
        """One window at the `current` values: ("trip", violations) when the guard trips; ("good", [])
        the first window after a change held through its watch; else ("", [])."""
        if current != self.values:
            self.values, self.settled = dict(current), False
            self.guard.watch()
        bad = self.guard.observe(window)
        if bad:
            return "trip", bad
        if not self.settled and not self.guard.watching:
            self.settled = True
            return "good", []
        return "", []

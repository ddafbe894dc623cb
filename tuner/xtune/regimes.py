"""Labels from measurement: the best value of a knob per load regime, read from sweep recordings.

A sweep recording (`xtune record` of a landscape sweep) holds, for each load regime, every value of
one knob applied in turn: a DECISION record with policy "sweep", `values = {knob: V}` and
`extra = {"regime": NAME}` starts a *cell* (regime, V); the frames after it, less the first
`settle` ones, are that cell's windows. A cell's outcome is the mean over its windows of the
objective signal (a latency quantile, lower is better) and of the throughput signal or expression
(e.g. `func.dp_round.active_flows.mean * func.dp_round.calls`, payloads delivered per window;
0 in a window where the signal is absent: nothing was delivered there).

The label of a regime is the value with the lowest objective among those whose throughput is at
least `min_throughput` (95 %) of the best throughput measured in that regime: the operator's rule
"fastest tail that gives up no more than 5 % of throughput", measured rather than stated.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xtune import expr
from xtune.recording import Decision, RecordingReader, RecordType
from xtune.signals import Catalog, decode_frame


@dataclass
class Cell:
    """The windows measured in one regime with one value of the knob."""

    regime: str
    value: int
    frames: list[dict[str, float]] = field(default_factory=list)

    def mean(self, signal: str, missing: float | None = None) -> float:
        """Mean over the windows of a signal, or of an expression over signals (e.g. a product).

        A window without the signal is skipped, or counts as `missing` when given: a rate is 0 in
        a window where nothing happened, and skipping those windows would favour the settings
        that work in rarer, larger rounds."""
        node = expr.parse(signal)
        xs = []
        for f in self.frames:
            try:
                x = expr.evaluate(node, f)
            except (expr.MissingSignal, ZeroDivisionError):
                if missing is not None:
                    xs.append(missing)
                continue
            if math.isfinite(x):
                xs.append(x)
        return sum(xs) / len(xs) if xs else math.nan


@dataclass
class Landscape:
    """Cells by regime and value, in the order the sweep measured them."""

    knob: str
    objective: str
    throughput: str
    cells: dict[str, dict[int, Cell]]
    min_throughput: float = 0.95

    def outcome(self, regime: str, value: int) -> tuple[float, float]:
        """(mean objective, mean throughput) of one cell, NaN when it has no window with them."""
        cell = self.cells[regime][value]
        return cell.mean(self.objective), cell.mean(self.throughput, missing=0.0)

    def eligible(self, regime: str) -> dict[int, float]:
        """Objective by value, for the values within the regime's throughput bound."""
        rows = {v: self.outcome(regime, v) for v in self.cells[regime]}
        rows = {v: r for v, r in rows.items() if not (math.isnan(r[0]) or math.isnan(r[1]))}
        if not rows:
            raise ValueError(f"regime {regime!r}: no cell has both {self.objective} and {self.throughput}")
        top = max(t for _, t in rows.values())
        return {v: o for v, (o, t) in rows.items() if t >= self.min_throughput * top}

    def best(self, regime: str) -> int:
        """The regime's label: lowest objective among values within the throughput bound."""
        eligible = self.eligible(regime)
        return min(eligible, key=lambda v: (eligible[v], v))

    def regret(self, regime: str, value: int) -> float | None:
        """Objective of `value` over that of the regime's best (1.0 = best); None if not measured."""
        if value not in self.cells[regime]:
            return None
        chosen, best = self.outcome(regime, value)[0], self.outcome(regime, self.best(regime))[0]
        return chosen / best if best > 0 and math.isfinite(chosen) else None


def read_landscape(
    recordings: Iterable[str | Path],
    knob: str,
    objective: str,
    throughput: str,
    settle: int = 2,
    min_throughput: float = 0.95,
) -> Landscape:
    """The cells of sweep recordings; a frame before any sweep decision belongs to no cell."""
    cells: dict[str, dict[int, Cell]] = {}
    for path in recordings:
        catalog: Catalog | None = None
        cell: Cell | None = None
        skip = 0
        for rec in RecordingReader(str(path)).records():
            if rec.type == RecordType.CATALOG:
                catalog = Catalog.from_json(rec.payload)
            elif rec.type == RecordType.DECISION:
                d = Decision.from_json(rec.payload)
                if d.policy != "sweep" or knob not in d.values:
                    continue
                regime = d.extra.get("regime")
                if not isinstance(regime, str) or not regime:
                    raise ValueError(f"{path}: sweep decision at offset {rec.offset} has no extra.regime")
                value = int(d.values[knob])
                cell = cells.setdefault(regime, {}).setdefault(value, Cell(regime, value))
                skip = settle
            elif rec.type == RecordType.FRAME and cell is not None:
                if skip:
                    skip -= 1
                    continue
                frame = decode_frame(rec.payload, catalog)
                cell.frames.append({k: v for k, v in frame.values.items() if k not in frame.empty})
    if not cells:
        raise ValueError(f"no sweep decisions about {knob!r} in {[str(p) for p in recordings]}")
    return Landscape(knob, objective, throughput, cells, min_throughput)


def samples(land: Landscape, features: Sequence[str]) -> tuple[list[list[float]], list[int], list[str]]:
    """(feature rows, best value per row, regime per row): every window of a regime is one sample.
    A feature is a signal name or an expression over signals (absent signals read as 0)."""
    read = expr.feature_reader(features)
    rows: list[list[float]] = []
    labels: list[int] = []
    regimes: list[str] = []
    for regime, by_value in land.cells.items():
        best = land.best(regime)
        for cell in by_value.values():
            for f in cell.frames:
                rows.append(read(f))
                labels.append(best)
                regimes.append(regime)
    return rows, labels, regimes


def minimax_fallback(land: Landscape) -> int:
    """What to run when the signals say nothing the tree can trust: among the values within the
    throughput bound in every regime, the one with the smallest worst-case regret; when no value is,
    the one whose worst throughput share (of each regime's best) is highest."""
    safe = set.intersection(*(set(land.eligible(r)) for r in land.cells))
    worst: dict[int, float] = {}
    for v in safe:
        ratios = [land.regret(r, v) for r in land.cells]
        if all(x is not None for x in ratios):
            worst[v] = max(x for x in ratios if x is not None)
    if worst:
        return min(worst, key=lambda v: (worst[v], v))
    common = set.intersection(*(set(c) for c in land.cells.values()))
    share: dict[int, float] = {}
    for v in common:
        shares = []
        for r in land.cells:
            top = max(land.outcome(r, u)[1] for u in land.cells[r])
            shares.append(land.outcome(r, v)[1] / top if top > 0 else math.nan)
        if all(math.isfinite(x) for x in shares):
            share[v] = min(shares)
    if not share:
        raise ValueError(f"no value of {land.knob} was measured with {land.throughput} in every regime")
    return max(share, key=lambda v: (share[v], -v))

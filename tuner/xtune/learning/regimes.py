"""Labels from measurement: the best value of a knob per load regime, read from sweep recordings.

A sweep recording (`xtune record` of a landscape sweep) holds, for each load regime, every value of
one knob applied in turn: a DECISION record with policy "sweep", `values = {knob: V}` and
`extra = {"regime": NAME}` starts a *cell* (regime, V); the frames after it, less the first
`settle` ones, are that cell's windows. A cell's outcome is the mean (or a chosen quantile) over
its windows of the objective signal (a latency, lower is better) and the mean of the throughput
signal or expression
(e.g. `func.dp_round.active_flows.mean * func.dp_round.rate`, payloads delivered per second;
0 in a window where the signal is absent: nothing was delivered there). A rate, not a count per
window: a window's real length varies, and with it every count.

The label of a regime is the value with the lowest objective among those whose throughput is at
least `min_throughput` (95 %) of the best throughput measured in that regime: the operator's rule
"fastest tail that gives up no more than 5 % of throughput", measured rather than stated.

A sweep of several rounds measures each cell once per round (each sweep decision starts a *pass*),
and a cell is judged by its worst pass: the highest objective and the lowest throughput of any pass.
A value near its capacity queues in some passes and not in others, depending on what else the host
was doing; pooled, one good pass hides the bad one, and such a value became the label of the
heaviest regimes and queued live. The rule is the one the benchmark's per-phase oracle uses.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xtune.config import expr
from xtune.signals.frames import Catalog, decode_frame
from xtune.signals.recording import Decision, RecordingReader, RecordType


@dataclass
class Cell:
    """The windows measured in one regime with one value of the knob."""

    regime: str
    value: int
    passes: list[list[dict[str, float]]] = field(default_factory=list)  # the windows of each pass

    @property
    def frames(self) -> list[dict[str, float]]:
        """Every window of every pass, in the order measured."""
        return [f for one in self.passes for f in one]

    def each_pass(self) -> list[Cell]:
        """One cell per pass that has windows."""
        return [Cell(self.regime, self.value, [one]) for one in self.passes if one]

    def values(self, signal: str, missing: float | None = None) -> list[float]:
        """A signal, or an expression over signals (e.g. a product), in each window. A window
        without it is skipped, or counts as `missing` when given: a rate is 0 in a window where
        nothing happened, and skipping those windows would favour the settings that work in rarer,
        larger rounds."""
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
        return xs

    def mean(self, signal: str, missing: float | None = None) -> float:
        """Mean over the windows (see `values`), NaN when no window has it."""
        xs = self.values(signal, missing)
        return sum(xs) / len(xs) if xs else math.nan

    def quantile(self, signal: str, q: float) -> float:
        """The q-quantile over the windows that have the signal: a cell's tail, which a mean hides
        when a value runs near its capacity and queues now and then."""
        xs = sorted(self.values(signal))
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else math.nan


@dataclass
class Landscape:
    """Cells by regime and value, in the order the sweep measured them."""

    knob: str
    objective: str
    throughput: str
    cells: dict[str, dict[int, Cell]]
    min_throughput: float = 0.95
    objective_quantile: float | None = None  # None: the mean over windows; else that quantile
    # Values whose objective is within this share of a regime's lowest count as equally good there:
    # among them the label is the one with the least worst-case regret over all regimes (a sweep's
    # cells vary between runs, and a label chosen by noise makes the tree follow noise).
    tolerance: float = 0.0
    _outcomes: dict[tuple[str, int], tuple[float, float]] = field(default_factory=dict, repr=False)

    def outcome(self, regime: str, value: int) -> tuple[float, float]:
        """(objective over the windows, mean throughput) of one cell, NaN when it has no window
        with them; the objective is the windows' mean, or their `objective_quantile`. A cell
        measured in several passes gets its worst: the highest objective and the lowest
        throughput of any pass (NaN when any pass has no window with them)."""
        key = (regime, value)
        if key not in self._outcomes:
            q = self.objective_quantile
            objs, rates = [], []
            for one in self.cells[regime][value].each_pass() or [self.cells[regime][value]]:
                objs.append(one.mean(self.objective) if q is None else one.quantile(self.objective, q))
                rates.append(one.mean(self.throughput, missing=0.0))
            self._outcomes[key] = (max(objs), min(rates))
        return self._outcomes[key]

    def eligible(self, regime: str) -> dict[int, float]:
        """Objective by value, for the values within the regime's throughput bound."""
        rows = {v: self.outcome(regime, v) for v in self.cells[regime]}
        rows = {v: r for v, r in rows.items() if not (math.isnan(r[0]) or math.isnan(r[1]))}
        if not rows:
            raise ValueError(f"regime {regime!r}: no cell has both {self.objective} and {self.throughput}")
        top = max(t for _, t in rows.values())
        return {v: o for v, (o, t) in rows.items() if t >= self.min_throughput * top}

    def lowest(self, regime: str) -> float:
        """The lowest objective among the values within the regime's throughput bound."""
        return min(self.eligible(regime).values())

    def best(self, regime: str) -> int:
        """The regime's label: lowest objective among values within the throughput bound; with a
        tolerance, the least worst-case regret among the values within it of the lowest."""
        eligible = self.eligible(regime)
        low = self.lowest(regime)
        if self.tolerance <= 0:
            return min(eligible, key=lambda v: (eligible[v], v))
        near = [v for v, o in eligible.items() if o <= low * (1 + self.tolerance)]
        return min(near, key=lambda v: (self.worst_regret(v), eligible[v], v))

    def regret(self, regime: str, value: int) -> float | None:
        """Objective of `value` over the regime's lowest (1.0 = best); None if not measured."""
        if value not in self.cells[regime]:
            return None
        chosen, best = self.outcome(regime, value)[0], self.lowest(regime)
        return chosen / best if best > 0 and math.isfinite(chosen) else None

    def worst_regret(self, value: int) -> float:
        """The value's largest regret over the regimes; infinite where it is outside a regime's
        throughput bound or not measured."""
        worst = 1.0
        for regime in self.cells:
            r = self.regret(regime, value) if value in self.eligible(regime) else None
            if r is None:
                return math.inf
            worst = max(worst, r)
        return worst


def read_landscape(
    recordings: Iterable[str | Path],
    knob: str,
    objective: str,
    throughput: str,
    settle: int = 2,
    min_throughput: float = 0.95,
    objective_quantile: float | None = None,
    tolerance: float = 0.0,
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
                cell.passes.append([])
                skip = settle
            elif rec.type == RecordType.FRAME and cell is not None:
                if skip:
                    skip -= 1
                    continue
                frame = decode_frame(rec.payload, catalog)
                cell.passes[-1].append({k: v for k, v in frame.values.items() if k not in frame.empty})
    if not cells:
        raise ValueError(f"no sweep decisions about {knob!r} in {[str(p) for p in recordings]}")
    if objective_quantile is not None and not 0.0 < objective_quantile < 1.0:
        raise ValueError(f"objective_quantile must be in (0, 1), not {objective_quantile}")
    if tolerance < 0:
        raise ValueError(f"tolerance must be at least 0, not {tolerance}")
    return Landscape(knob, objective, throughput, cells, min_throughput, objective_quantile, tolerance)


def samples(
    land: Landscape, features: Sequence[str], eligible_only: bool = False
) -> tuple[list[list[float]], list[int], list[str]]:
    """(feature rows, best value per row, regime per row): every window of a regime is one sample.
    A feature is a signal name, an expression over signals or an `ewma` over a cell's windows
    (absent signals read as 0). `eligible_only` leaves out the cells of values outside the regime's
    throughput bound: a server that falls behind shows its own capacity in its signals, not the load,
    and a policy is never meant to run there."""
    rows: list[list[float]] = []
    labels: list[int] = []
    regimes: list[str] = []
    for regime, by_value in land.cells.items():
        best = land.best(regime)
        keep = land.eligible(regime) if eligible_only else by_value
        for cell in by_value.values():
            if cell.value not in keep:
                continue
            read = expr.FeatureReader(features)  # a cell's windows are one sequence (ewma)
            for i, f in enumerate(cell.frames):
                x = read(f)
                if i < read.warmup:
                    continue  # an average still near the cell's first window
                rows.append(x)
                labels.append(best)
                regimes.append(regime)
    return rows, labels, regimes


def minimax_fallback(land: Landscape) -> int:
    """What to run when the signals say nothing the tree can trust: among the values within the
    throughput bound in every regime, the one with the smallest worst-case regret; when no value is,
    the one whose worst throughput share (of each regime's best) is highest."""
    safe = set.intersection(*(set(land.eligible(r)) for r in land.cells))
    worst = {v: w for v in safe if math.isfinite(w := land.worst_regret(v))}
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

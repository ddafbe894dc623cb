"""`xtune train`: fit a decision tree from recordings (signals -> the knob values decided then).

Every DECISION record of a recording that sets the chosen knobs becomes one sample: its features
are the values of the latest frame before it, its label the joint knob setting (one class per
distinct setting). The fitted tree is saved with a model card (data, accuracy on the training
recordings, depth) and compiled to straight-line code when loaded (policies/tree.py).
"""

from __future__ import annotations

import math
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from xtune.config import expr
from xtune.learning.regimes import Landscape, minimax_fallback, read_landscape, samples
from xtune.policies.tree import TreeModel
from xtune.signals.frames import Catalog, decode_frame
from xtune.signals.recording import Decision, RecordingReader, RecordType


@dataclass
class Dataset:
    features: list[str]
    rows: list[list[float]]
    labels: list[tuple[int, ...]]


def dataset(
    recordings: Sequence[str | Path], knobs: Sequence[str], features: Sequence[str] | None
) -> Dataset:
    samples: list[tuple[dict[str, float], tuple[int, ...]]] = []
    for path in recordings:
        catalog: Catalog | None = None
        latest: dict[str, float] | None = None
        for rec in RecordingReader(str(path)).records():
            if rec.type == RecordType.CATALOG:
                catalog = Catalog.from_json(rec.payload)
            elif rec.type == RecordType.FRAME:
                frame = decode_frame(rec.payload, catalog)
                latest = {k: v for k, v in frame.values.items() if k not in frame.empty}
            elif rec.type == RecordType.DECISION and latest is not None:
                d = Decision.from_json(rec.payload)
                if all(k in d.values for k in knobs):
                    samples.append((latest, tuple(int(d.values[k]) for k in knobs)))
    if not samples:
        raise ValueError(f"no decisions about {list(knobs)} after a frame in {[str(p) for p in recordings]}")
    names = sorted(features) if features else sorted({n for values, _ in samples for n in values})
    rows = [[values.get(n, 0.0) for n in names] for values, _ in samples]
    return Dataset(list(names), rows, [label for _, label in samples])


def train_tree(
    recordings: Sequence[str | Path],
    knobs: Sequence[str],
    out: str | Path,
    features: Sequence[str] | None = None,
    max_depth: int = 8,
) -> TreeModel:
    from sklearn.tree import DecisionTreeClassifier

    data = dataset(recordings, knobs, features)
    classes = sorted(set(data.labels))
    y = [classes.index(label) for label in data.labels]
    tree = DecisionTreeClassifier(max_depth=max_depth, random_state=0).fit(data.rows, y)
    accuracy = float(tree.score(data.rows, y))
    card = {
        "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "recordings": [str(p) for p in recordings],
        "samples": len(y),
        "classes": len(classes),
        "depth": int(tree.get_depth()),
        "leaves": int(tree.get_n_leaves()),
        "training_accuracy": accuracy,
    }
    model = TreeModel.from_sklearn(tree, data.features, knobs, [list(c) for c in classes], card)
    model.save(out)
    return model


def _class_of(model: TreeModel, value: int) -> int:
    return model.classes.index([value])


def evaluate(model: TreeModel, land: Landscape) -> dict[str, object]:
    """Held-out accuracy (windows whose choice is the regime's measured best) and regret per regime.

    Regret compares the objective of the value the tree chooses most often in a regime with the
    best value's, both as measured in `land`; a chosen value the sweep did not measure there is
    reported, not guessed.
    """
    decide = model.compile()
    hits = total = 0
    per_regime: dict[str, dict[str, object]] = {}
    for regime, by_value in land.cells.items():
        best = land.best(regime)
        votes: dict[int, int] = {}
        for cell in by_value.values():
            read = expr.FeatureReader(model.features)  # a cell's windows are one sequence (ewma)
            for i, f in enumerate(cell.frames):
                x = read(f)
                if i < read.warmup:
                    continue
                choice = model.classes[decide(x)][0]
                votes[choice] = votes.get(choice, 0) + 1
                hits += choice == best
                total += 1
        chosen = max(votes, key=lambda v: (votes[v], -v)) if votes else best
        per_regime[regime] = {"best": best, "chosen": chosen, "regret": land.regret(regime, chosen)}
    ratios = [r["regret"] for r in per_regime.values() if isinstance(r["regret"], float)]
    return {
        "accuracy": hits / total if total else math.nan,
        "windows": total,
        "regret_mean": sum(ratios) / len(ratios) if ratios else None,
        "regret_max": max(ratios) if ratios else None,
        "unmeasured_choices": [k for k, r in per_regime.items() if r["regret"] is None],
        "regimes": per_regime,
    }


def decision_latency_us(
    model: TreeModel, rows: Sequence[Sequence[float]], repeat: int = 20
) -> dict[str, float]:
    """p50/p99 of one compiled decision, timed per call over the given rows."""
    decide = model.compile()
    times: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(repeat):
        for x in rows:
            t0 = clock()
            decide(x)
            times.append((clock() - t0) / 1000)
    times.sort()
    return {"p50": times[len(times) // 2], "p99": times[min(len(times) - 1, int(len(times) * 0.99))]}


def train_regimes(
    recordings: Sequence[str | Path],
    heldout: Sequence[str | Path],
    knob: str,
    objective: str,
    throughput: str,
    out: str | Path,
    features: Sequence[str] | None = None,
    max_depth: int = 6,
    settle: int = 2,
    margin: float = 0.1,
    objective_quantile: float | None = None,
    min_leaf_share: float = 0.01,
    tolerance: float = 0.0,
    neighbours: int = 0,
    watch: Sequence[str] = (),
    watch_quantile: float = 0.99,
    prefer: str | None = None,
    leaf_regime_share: float = 0.1,
) -> TreeModel:
    """A tree labelled with the measured best value per regime, checked on held-out sweeps.

    The card reports held-out accuracy and regret, a gradient-boosted ensemble's held-out accuracy
    beside the tree's (the tree ships: it compiles to straight-line code), and the decision latency.
    The guard's ranges are the training ranges widened by `margin` of their span; its fallback is the
    value with the smallest worst-case regret over the training regimes. `objective_quantile`
    judges a cell by that quantile of its windows' objective instead of their mean (a tail target);
    `tolerance` makes values within that share of a regime's lowest objective equally good there
    (Landscape.best). With `neighbours` k > 0 a regime's label is the value whose worst regret over
    the regime and its k nearest regimes (by their mean features) is least: the policy meets loads
    between the measured ones, and a value best at one rate but queueing at the next is no label.
    `watch` names signals the guard watches without the tree splitting on them: their range is
    taken (each cell between its 1 - `watch_quantile` and `watch_quantile` quantiles, so that a
    transient in under 1 % of a cell's windows does not set it, widened by `margin`) over the
    cells of each regime's labelled value and of the fallback, what the policy sees when
    it does what it should; outside it the policy gives the fallback at once (e.g. a request's
    wait growing past any measured there: the server fell behind, and a load signal counted by the
    server itself then shows its capacity, not the load).
    `prefer` ("larger" or "smaller") states the knob's safe direction, for knobs where erring one
    way costs a little and the other way a lot (a batch or buffer a step too small queues without
    bound; a step too large waits a little): values that tie (within `tolerance`) go to that side,
    in labels and leaves, and the fallback is the label of that side's extreme regime (e.g. the
    value for the heaviest load measured) instead of the least worst-case regret.
    A leaf's value is then the least total cost over the regimes with at least `leaf_regime_share`
    of its training windows (`_least_regret_leaves`).
    """
    if prefer not in (None, "larger", "smaller"):
        raise ValueError(f"prefer must be 'larger' or 'smaller', not {prefer!r}")
    if not 0.0 <= leaf_regime_share < 1.0:
        raise ValueError(f"leaf_regime_share must be in [0, 1), not {leaf_regime_share}")
    _warn_per_window_counts([objective, throughput, *(features or ()), *watch])
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.tree import DecisionTreeClassifier

    land = read_landscape(
        recordings, knob, objective, throughput, settle, 0.95, objective_quantile, tolerance
    )
    test = (
        read_landscape(heldout, knob, objective, throughput, settle, 0.95, objective_quantile, tolerance)
        if heldout
        else None
    )
    names = sorted(features) if features else _signal_names(land, {objective, throughput})
    rows, _, regimes = samples(land, names, eligible_only=True)
    # Candidates: every regime's best, the fallback, and every value measured in all regimes (a
    # value that is no regime's best can still be the least regret where regimes look alike).
    common = set.intersection(*(set(by_value) for by_value in land.cells.values()))
    fallback = minimax_fallback(land)
    values = sorted({land.best(r) for r in land.cells} | {fallback} | common)
    near = _neighbours(rows, regimes, neighbours)
    cost, raw = _robust_costs(land, values, near)
    label = {
        r: min(values, key=lambda v: (cost[(r, v)], _lean(v, prefer, raw[(r, v)]), v)) for r in land.cells
    }
    if prefer is not None:
        fallback = (max if prefer == "larger" else min)(label.values())
    y = [values.index(label[r]) for r in regimes]
    # A leaf holds at least min_leaf_share of the windows: with noisy per-window signals a smaller
    # leaf carves thresholds out of noise, and the live policy flaps across them.
    leaf = max(3, int(min_leaf_share * len(y)))
    tree = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=leaf, random_state=0).fit(rows, y)
    ranges = []
    for i in range(len(names)):
        lo, hi = min(r[i] for r in rows), max(r[i] for r in rows)
        pad = margin * (hi - lo) if hi > lo else margin * max(abs(hi), 1.0)
        ranges.append([lo - pad, hi + pad])
    card: dict[str, object] = {
        "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "labels": f"measured best {knob} per regime: min "
        f"{'mean' if objective_quantile is None else f'q{objective_quantile:g}'} over windows of "
        f"{objective} with {throughput} >= {land.min_throughput:.0%} of the regime's best",
        "min_samples_leaf": leaf,
        "recordings": [str(p) for p in recordings],
        "heldout_recordings": [str(p) for p in heldout],
        "regimes": {r: land.best(r) for r in land.cells},
        "labels_robust": label,
        "neighbours": near,
        "samples": len(y),
        "depth": int(tree.get_depth()),
        "leaves": int(tree.get_n_leaves()),
    }
    model = TreeModel.from_sklearn(tree, names, [knob], [[v] for v in values], card)
    card["relabelled_leaves"] = _least_regret_leaves(
        model, tree.apply(rows), regimes, land, values, (cost, raw), prefer, leaf_regime_share
    )
    card["leaf_regime_share"] = leaf_regime_share
    card["prefer"] = prefer
    fit = evaluate(model, land)
    card["training_accuracy"], card["training_regret_mean"] = fit["accuracy"], fit["regret_mean"]
    model.guard = {"ranges": ranges, "fallback": _class_of(model, fallback)}
    if watch:
        model.guard["watch"] = _watch_ranges(land, label, fallback, watch, watch_quantile, margin, values)
        card["watch"] = model.guard["watch"]
    card["fallback"] = fallback
    if test is not None:
        card["heldout"] = evaluate(model, test)
        trows, tlabels, _ = samples(test, names)
        known = [(r, values.index(v)) for r, v in zip(trows, tlabels, strict=True) if v in values]
        gbt = GradientBoostingClassifier(random_state=0).fit(rows, y) if len(set(y)) > 1 else None
        if gbt is not None and known:
            card["heldout_accuracy_gbt"] = float(gbt.score([r for r, _ in known], [c for _, c in known]))
        card["decision_us"] = decision_latency_us(model, trows[:200])
    model.save(out)
    return model


def _watch_ranges(
    land: Landscape,
    label: dict[str, int],
    fallback: int,
    names: Sequence[str],
    q: float,
    margin: float,
    values: Sequence[int] = (),
) -> list[dict[str, object]]:
    """[{"signal", "range", "drain"}]: `range` from the lowest to the highest of the cells where a
    regime ran its label or the fallback, each cell's windows cut at its 1 - q and q quantiles
    (absent signals skipped). Per cell, not pooled: a pooled quantile cuts off a whole cell's tail,
    and the fallback's own cells belong in the range, since a watched signal that moves with the
    value (a wait that grows with a batch) would otherwise keep tripping on the fallback it just
    applied.
    `drain[c][k]` (class indices into `values`) is the same range over the cells of value c in the
    regimes labelled k, or None where no regime is: what the setting in effect showed under the
    loads the new setting suits. The policy leaves c for k only inside it; above it, the load that
    called for c has left work behind (a backlog still draining) that k would serve more slowly."""
    out: list[dict[str, object]] = []
    for name in names:
        if not expr.is_name(name):
            raise ValueError(f"watch signal {name!r}: a signal name is needed (absent windows are skipped)")
        rng = _cells_range(land, name, [(r, v) for r in land.cells for v in {label[r], fallback}], q, margin)
        if rng is None:
            raise ValueError(f"watch signal {name!r}: not in the windows of any regime's labelled value")
        drain = [
            [
                _cells_range(land, name, [(r, c) for r in land.cells if label[r] == k], q, margin)
                for k in values
            ]
            for c in values
        ]
        out.append({"signal": name, "range": rng, "drain": drain})
    return out


def _cells_range(
    land: Landscape, name: str, cells: Sequence[tuple[str, int]], q: float, margin: float
) -> list[float] | None:
    """[lo, hi] of signal `name` over the (regime, value) cells, each cut at its 1 - q and q
    quantiles, widened by `margin` of the span; None when no such cell has the signal."""
    bounds = []
    for regime, value in cells:
        cell = land.cells[regime].get(value)
        if cell is None:
            continue
        xs = sorted(f[name] for f in cell.frames if name in f and math.isfinite(f[name]))
        if xs:
            bounds.append((xs[int((1 - q) * (len(xs) - 1))], xs[int(q * (len(xs) - 1))]))
    if not bounds:
        return None
    lo, hi = min(b[0] for b in bounds), max(b[1] for b in bounds)
    pad = margin * (hi - lo) if hi > lo else margin * max(abs(hi), 1.0)
    return [lo - pad, hi + pad]


def _neighbours(rows: Sequence[Sequence[float]], regimes: Sequence[str], k: int) -> dict[str, list[str]]:
    """Each regime's k nearest regimes by the distance between their mean feature vectors (each
    feature scaled by its spread over the regimes' means)."""
    sums: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for row, regime in zip(rows, regimes, strict=True):
        acc = sums.setdefault(regime, [0.0] * len(row))
        for i, x in enumerate(row):
            acc[i] += x
        counts[regime] = counts.get(regime, 0) + 1
    means = {r: [x / counts[r] for x in acc] for r, acc in sums.items()}
    width = len(next(iter(means.values()), []))
    spread = [
        max(m[i] for m in means.values()) - min(m[i] for m in means.values()) or 1.0 for i in range(width)
    ]

    def dist(a: str, b: str) -> float:
        return math.sqrt(sum(((means[a][i] - means[b][i]) / spread[i]) ** 2 for i in range(width)))

    return {r: sorted((o for o in means if o != r), key=lambda o: dist(r, o))[:k] for r in means}


def _robust_costs(
    land: Landscape, values: Sequence[int], near: dict[str, list[str]]
) -> tuple[dict[tuple[str, int], float], dict[tuple[str, int], float]]:
    """(cost, raw) of value v for a window of regime r: the largest regret of v over r and r's
    neighbours (infinite outside a throughput bound or where not measured). In `cost` a regret
    within the landscape's tolerance of the best counts as 1 (a tie); `raw` keeps it, to break
    ties by what was measured nearby rather than by noise."""
    own: dict[tuple[str, int], float] = {}
    for regime in land.cells:
        eligible = land.eligible(regime)
        for v in values:
            r = land.regret(regime, v) if v in eligible else None
            own[(regime, v)] = r if r is not None and math.isfinite(r) else math.inf
    raw = {
        (regime, v): max(own[(o, v)] for o in [regime, *near.get(regime, [])])
        for regime in land.cells
        for v in values
    }
    cost = {k: 1.0 if r <= 1 + land.tolerance else r for k, r in raw.items()}
    return cost, raw


def _lean(value: int, prefer: str | None, otherwise: float) -> float:
    """The tie-break among values of equal cost: toward the safe side when one is stated, else by
    the measured regret nearby (`otherwise`)."""
    if prefer == "larger":
        return -value
    if prefer == "smaller":
        return value
    return otherwise


def _least_regret_leaves(
    model: TreeModel,
    leaf_of: Sequence[int],
    regimes: Sequence[str],
    land: Landscape,
    values: Sequence[int],
    costs: tuple[dict[tuple[str, int], float], dict[tuple[str, int], float]],
    prefer: str | None = None,
    min_share: float = 0.0,
) -> int:
    """Give each leaf the value with the least total cost (`_robust_costs`) over the training
    windows that reach it; returns how many leaves changed. The classifier's majority vote treats
    every wrong value alike, but a value too small for the heaviest regime in a leaf queues without
    bound while one a step too large costs a little latency: this is where the tree learns that
    asymmetry from the measurements. Only regimes with at least `min_share` of a leaf's windows
    count: with 1 ms windows a light regime's noisy rate strays into a heavier leaf now and then
    (and a heavy one into a lighter leaf), and one such stray in a leaf, infinite for every value
    too small for its regime, pushed whole light leaves two steps up (a light load's leaf gave 8
    where 2 was measured best). A stray window does not move the live policy toward the unsafe
    side: that takes `hold` windows in a row there."""
    counts: dict[int, dict[str, int]] = {}
    for leaf, regime in zip(leaf_of, regimes, strict=True):
        per = counts.setdefault(int(leaf), {})
        per[regime] = per.get(regime, 0) + 1
    cost, raw = costs
    changed = 0
    for leaf, every in counts.items():
        total_windows = sum(every.values())
        # A leaf where no regime reaches the share (many regimes evenly mixed) counts them all.
        per = {r: n for r, n in every.items() if n >= min_share * total_windows} or every
        total = {v: sum(n * cost[(r, v)] for r, n in per.items()) for v in values}
        tie = {v: sum(n * raw[(r, v)] for r, n in per.items()) for v in values}
        best = min(total, key=lambda v: (total[v], _lean(v, prefer, tie[v]), v))
        if math.isfinite(total[best]) and model.nodes[leaf][4] != values.index(best):
            model.nodes[leaf][4] = values.index(best)
            changed += 1
    return changed


_SIGNAL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*")


def _warn_per_window_counts(texts: Sequence[str]) -> None:
    """Warn when an expression reads a count per window (`X.calls`) rather than a rate.

    A window's real length moves with the CPU left to the observer, and so with the knob's value in
    effect: a count per window then favours the value that stretches the windows."""
    counts = sorted({name for text in texts for name in _SIGNAL.findall(text) if name.endswith(".calls")})
    if counts:
        rates = ", ".join(name.removesuffix(".calls") + ".rate" for name in counts)
        warnings.warn(
            f"{', '.join(counts)}: per-window counts depend on the real window length, which moves with "
            f"the value in effect; use rates per second ({rates}, or X.ARG.mean * X.rate for a "
            "quantity per call)",
            UserWarning,
            stacklevel=3,
        )


def _signal_names(land: Landscape, exclude: set[str]) -> list[str]:
    names = {n for by_value in land.cells.values() for c in by_value.values() for f in c.frames for n in f}
    used = {n for e in exclude for n in expr.signals(expr.parse(e))}
    return sorted(names - exclude - used)

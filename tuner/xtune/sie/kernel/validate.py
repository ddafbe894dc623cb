"""Whether a kernel perf-const's spans hold for values the analysis did not build, and which.

Three builds fit each update (IV = a*V + b, or a scale proportional to V) and gcc may fold facts
true of those values only (a mask V - 1 when all are powers of two, a division exact for
multiples). So one more build, with a value coprime to every analyzed one and inside the range
the spans hold for, must give the same spans with updates that predict its immediates exactly
(the fit and the scale check are redone over all the builds); a build of another code shape is
skipped for the next value (up to three). When it does not:
  - a build with an odd multiple of the values' gcd g that holds means V must be a multiple of g;
  - else, when every value is a power of two, a build with another power of two that holds means
    V must be a power of two;
  - else the constant is refused with what each build showed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import count, islice

from xtune.sie.scope import PerfConst, Refusal, Span

SHAPE = "code shape depends on the constant"
# How far from the compiled value a validation value is looked for.
_SEARCH = 4096


def validation_values(values: list[int], low: int, high: int) -> list[int]:
    """Values not among `values`, coprime to each, inside [low, high], in the order they are
    tried: the first above 1.5x the compiled value, the nearest below it, the nearest above it."""

    def first(candidates: range) -> list[int]:
        ok = (v for v in candidates if v not in values and all(math.gcd(v, x) == 1 for x in values))
        return list(islice(ok, 1))

    v0 = values[0]
    start = max(v0 + abs(v0) // 2 + 1, low)
    found = [
        *first(range(start, min(start + _SEARCH, high + 1))),
        *first(range(min(v0 - 1, high), max(v0 - _SEARCH, low - 1), -1)),
        *first(range(max(v0 + 1, low), min(v0 + _SEARCH, high + 1))),
    ]
    return list(dict.fromkeys(found))


def _update(s: Span) -> tuple[object, ...]:
    """What a span is to xsie.ko: where it is probed and the update it applies."""
    return (
        s.function,
        s.start,
        s.end,
        s.update.kind,
        s.update.register,
        s.update.probe,
        s.update.pre_add,
        s.state.a,
        s.state.b,
        s.state.width,
    )


def why_not(const: PerfConst, wide: PerfConst, extra: int) -> str:
    """Why `wide` (the analysis of `const.values` and `extra`) does not confirm `const` ("" when it
    does)."""
    if wide.refusals:
        r = wide.refusals[0]
        return f"with V={extra}: {r.function}: {r.reason}"
    if [_update(s) for s in wide.spans] != [_update(s) for s in const.spans]:
        return f"with V={extra}: the spans or their updates differ"
    return ""


def validate(const: PerfConst, analyze_with: Callable[[list[int]], PerfConst]) -> list[str]:
    """Check `const` (tunable, its range set) with builds of other values (`analyze_with(values)`
    analyzes the given values, the compiled one first). Records `multiple_of`, `power_of_two` and
    `constraint`, or appends a refusal; returns notes saying what was built."""
    vals = const.values
    assert const.min_value is not None and const.max_value is not None
    low, high = const.min_value, const.max_value

    def check(extra: int) -> str:
        return why_not(const, analyze_with([*vals, extra]), extra)

    # A build whose code has another shape (gcc allocated registers or ordered blocks otherwise,
    # as the analysis values are chosen to avoid) says nothing about the updates: the next is tried.
    tried: list[str] = []
    for extra in validation_values(vals, low, high):
        why = check(extra)
        if not why:
            skipped = f" ({'; '.join(tried)})" if tried else ""
            return [f"{const.name}: the spans hold with V={extra} (coprime to the values analyzed){skipped}"]
        tried.append(why)
        if SHAPE not in why:
            break  # the updates do not predict this build
    if not tried:
        tried.append(f"no value coprime to {vals} lies in [{low}, {high}]")
    why = "; ".join(tried)
    g = math.gcd(*vals)
    if g > 1:
        odd = next(g * m for m in count(3, 2) if g * m not in vals)
        why_odd = check(odd) if low <= odd <= high else f"{odd} is outside [{low}, {high}]"
        if not why_odd:
            const.multiple_of = g
            const.constraint = f"multiple of {g}"
            return [f"{const.name}: {why}; with V={odd} they hold: V must be a multiple of {g}"]
        tried.append(why_odd)
    if all(v > 0 and v & (v - 1) == 0 for v in vals):
        power = next((p for p in (2 * max(vals), min(vals) // 2) if p not in vals and low <= p <= high), 0)
        why_power = check(power) if power else f"no other power of two lies in [{low}, {high}]"
        if not why_power:
            const.power_of_two = True
            const.constraint = "power of two"
            return [f"{const.name}: {why}; with V={power} they hold: V must be a power of two"]
        tried.append(why_power)
    const.refusals.append(Refusal("", "the spans hold only for the values analyzed", "; ".join(tried)))
    return []

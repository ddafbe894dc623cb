"""The band of values around the original whose builds have its code shape (analyze.py).

Some code changes shape with the constant's magnitude, not its residue: a doubling loop unrolled
once per bit of K, a loop bound folded to K / 7. The values sharing the original's shape then form
an interval around it. These helpers find that interval by bisection between builds known to have
the shape and builds known not to, and choose the values to analyze and to validate with.

What the bisection assumes: the shape is constant between two builds of the original's shape with
no build of another shape between them. Only the values built are known; the validation build and
every build of the search inside the band are checked against the fitted spans."""

from __future__ import annotations

import math
from collections.abc import Callable

# Builds each side's bisection may add (both sides: twice this); an edge not reached within them
# is left at the farthest value known to have the shape.
SIDE_BUILDS = 4
# Values a band needs: the original, two more to fit and one to validate with.
MIN_BAND = 4


def edge(v0: int, limit: int, known: dict[int, bool], same: Callable[[int], bool]) -> int:
    """The farthest value from v0 toward `limit` up to which every value built has the original's
    shape, within SIDE_BUILDS more builds. `known`: the shape (True: the original's) of the values
    built so far, updated with those built here; `same(v)` builds v and says."""
    step = 1 if limit >= v0 else -1
    side = sorted((v for v in known if (v - v0) * step > 0 and (limit - v) * step >= 0), key=abs_from(v0))
    good, bad = v0, None
    for v in side:
        if not known[v]:
            bad = v
            break
        good = v
    if bad is None and good != limit:
        known[limit] = same(limit)  # the spec's values are built: only without them is this a build
        if known[limit]:
            return limit
        bad = limit
    builds = 0
    while bad is not None and abs(bad - good) > 1 and builds < SIDE_BUILDS:
        mid = (good + bad) // 2  # strictly between: they are more than 1 apart
        known[mid] = same(mid)
        builds += 1
        good, bad = (mid, bad) if known[mid] else (good, mid)
    return good


def abs_from(v0: int) -> Callable[[int], int]:
    return lambda v: abs(v - v0)


def fit_values(v0: int, lo: int, hi: int, known: dict[int, bool]) -> list[int]:
    """The original and two values of [lo, hi] to fit with: the band's ends, or, where one end is the
    original, the known same-shape value (else the value) halfway along the longer side."""
    chosen = [v0] + [v for v in (lo, hi) if v != v0]
    if len(chosen) < 3:
        far = lo if v0 - lo >= hi - v0 else hi
        mid = (v0 + far) // 2
        inside = [v for v, s in known.items() if s and min(v0, far) <= v <= max(v0, far) and v not in chosen]
        pick = min(inside, key=abs_from(mid)) if inside else mid
        if pick not in chosen:
            chosen.append(pick)
    return chosen


def validation_value(lo: int, hi: int, fitted: list[int]) -> int | None:
    """A value of [lo, hi] no fit used, coprime to every fitted value when one is (nearest the
    middle), else the one nearest the middle; None when the band has no other value."""
    free = [v for v in range(lo, hi + 1) if v not in fitted]
    if not free:
        return None
    mid = (lo + hi) // 2
    coprime = [v for v in free if all(math.gcd(v, x) == 1 for x in fitted)]
    return min(coprime or free, key=lambda v: (abs(v - mid), v))

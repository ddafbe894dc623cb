"""Values for a loop whose shape depends on the constant's residue (analyze.py).

A loop the compiler vectorizes or unrolls by a factor F gets a remainder loop, or none, or a
shorter one, after the main loop depending on K mod F; for the multiples of F it is one shape.
These helpers choose the multiples of a power of two to analyze with, the one to validate with,
and describe what the builds showed when no factor gives one shape."""

from __future__ import annotations

import math

from xtune.sie.disasm import Insn

# Vector widths and unroll factors x86-64 compilers use (4 ints per SSE register, 8 per AVX one,
# unrolled by up to 8): a shape that depends on the residue modulo one of these is one shape for
# its multiples. The smallest that holds is taken: it refuses the fewest values.
FACTORS = (4, 8, 16, 32, 64)
# A function whose instruction count rises with K over this many builds around the original is a
# loop copied once per iteration (or per few).
UNROLLED_POINTS = 3


def residue_values(values: list[int], f: int) -> list[int] | None:
    """The original value and, for each other value of the spec, the multiple of `f` nearest to it
    (the lower one on a tie) inside the spec's range, each used once; None when the original is no
    multiple of `f` (the table describes its build) or the range holds too few multiples."""
    v0, lo, hi = values[0], min(values), max(values)
    if v0 % f:
        return None
    chosen = [v0]
    multiples = [m for m in range(math.ceil(lo / f) * f, hi + 1, f) if m > 0]
    for v in values[1:]:
        free = [m for m in multiples if m not in chosen]
        if not free:
            return None
        chosen.append(min(free, key=lambda m: (abs(m - v), m)))
    return chosen


def validation_values(values: list[int], f: int) -> list[int]:
    """Multiples of `f` not analyzed that the spans must also hold for: the odd multiple (no
    multiple of 2f) nearest the middle of the values' range, where the shape they share is most
    likely to hold, and the original plus `f` (when not analyzed), whose residue modulo the larger
    powers of two differs from the original's in the lowest bit an allowed value can change."""
    lo, hi, v0 = min(values), max(values), values[0]
    mid = (lo + hi) // 2
    odd = [f * m for m in range(1, 2 * (hi // f) + 4, 2) if f * m not in values]
    checks = [min(odd, key=lambda v: (abs(v - mid), v))]
    if v0 + f not in values and v0 + f not in checks:
        checks.append(v0 + f)
    return checks


def shapes_text(name: str, counts: dict[int, int]) -> str:
    """`K=32: 31, K=64: 55 instructions`, by value."""
    return ", ".join(f"{name}={v}: {n}" for v, n in sorted(counts.items())) + " instructions"


def unrolled(counts: dict[int, int], v0: int, looping: bool) -> bool:
    """The original's function has no loop (`looping`: a branch back) and its instruction count
    rises strictly with the value over at least UNROLLED_POINTS builds, the original's among them:
    a loop copied per iteration, whose code is another for every K."""
    if looping:
        return False
    order = sorted(counts)
    i = order.index(v0)
    lo = hi = i
    while lo > 0 and counts[order[lo - 1]] < counts[order[lo]]:
        lo -= 1
    while hi + 1 < len(order) and counts[order[hi + 1]] > counts[order[hi]]:
        hi += 1
    return hi - lo + 1 >= UNROLLED_POINTS


def branches_back(insns: list[Insn], vaddr: int) -> bool:
    """A direct jump of the function to itself at or before the jump: a loop."""
    return any(i.is_jump and i.target is not None and vaddr <= i.target <= vaddr + i.off for i in insns)

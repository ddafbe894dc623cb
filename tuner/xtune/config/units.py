"""Units of objectives and SLO left sides, and numbers written with them for people.

A unit comes from the SLO file (`objective.unit`, a benchmark metric's `unit`) or from the signal
catalog (xobserve names one per signal: `us`, `calls/s`, `bytes`, ...). An expression has the unit
of the signal it reads when it reads one (`p99(tcp.srtt)`, `func.x.rate`, `0.95 * baseline` aside),
none otherwise. `format_value` scales to a readable prefix (812 us, 4.1 ms, 93.8 Mbit/s) with three
or four significant digits and never in exponent notation; `ascii=True` writes `us` for `µs`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from xtune.config import expr

# Time units, in seconds, and the order they are shown in.
_TIME = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_TIME_SHOWN = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))
_SI = (("G", 1e9), ("M", 1e6), ("k", 1e3))
_BINARY = (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def expression_unit(text: str, units: Mapping[str, str]) -> str:
    """The unit of an expression: its signals' unit when they all have the same one, else ""."""
    try:
        node = expr.parse(text)
    except expr.ExprError:
        return ""
    return node_unit(node, units)


def node_unit(node: expr.Node, units: Mapping[str, str]) -> str:
    """The unit of a parsed expression (an SLO line's left side), "" when it has none."""
    return _node_unit(node, units) or ""


def _node_unit(node: expr.Node, units: Mapping[str, str]) -> str | None:
    """A node's unit; "" for a plain number, None for a mix (a ratio, a sum of different units)."""
    if isinstance(node, expr.Num):
        return ""
    if isinstance(node, expr.Signal):
        return _signal_unit(node.name, units)
    if isinstance(node, expr.Neg):
        return _node_unit(node.arg, units)
    if isinstance(node, expr.BinOp):
        left, right = _node_unit(node.left, units), _node_unit(node.right, units)
        if node.op in "*/" and isinstance(node.right, expr.Num):
            return left
        if node.op == "*" and isinstance(node.left, expr.Num):
            return right
        return left if node.op in "+-" and left == right else None
    if isinstance(node, expr.Call):
        found = {_node_unit(a, units) for a in node.args}
        return found.pop() if len(found) == 1 else None
    return None


def _signal_unit(name: str, units: Mapping[str, str]) -> str:
    if name in units:
        return units[name]
    base, _, suffix = name.rpartition(".")  # x.p99 is published under its base name's unit too
    return units.get(base, "") if suffix in expr.QUANTILES else ""


def significant(x: float) -> str:
    """Three or four significant digits, thousands separated, never an exponent."""
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1 or a == 0:
        return f"{x:.2f}"
    return f"{x:.{min(2 - math.floor(math.log10(a)), 12)}f}"


def scale_of(x: float, unit: str, ascii: bool = False) -> tuple[float, str]:
    """The factor and the unit to show `x` (in `unit`) with: (1e-3, "ms") for 2,183 us."""
    if unit in _TIME:
        seconds = abs(x) * _TIME[unit]
        name, scale = next(((n, s) for n, s in _TIME_SHOWN if seconds >= s), _TIME_SHOWN[-1])
        return _TIME[unit] / scale, unit_text(name, ascii)
    if unit in ("bytes/s", "B/s", "bit/s", "bits/s"):
        bits = 8.0 if unit in ("bytes/s", "B/s") else 1.0
        prefix, scale = next(((p, s) for p, s in _SI if abs(x) * bits >= s), ("", 1.0))
        return bits / scale, f"{prefix}bit/s"
    if unit in ("bytes", "B"):
        prefix, size = next(((p, s) for p, s in _BINARY if abs(x) >= s), ("", 1))
        return 1 / size, f"{prefix}B"
    if unit == "fraction":
        return 100.0, "%"
    return 1.0, unit


def unit_text(unit: str, ascii: bool = False) -> str:
    """A unit as people read it: `µs` for `us` (unless ASCII only)."""
    return "µs" if unit == "us" and not ascii else unit


def format_value(x: float | None, unit: str = "", ascii: bool = False) -> str:
    """`x` with its unit, scaled to a readable prefix; "-" when there is no value."""
    if x is None or math.isnan(x):
        return "-"
    if math.isinf(x):
        return f"{'-' if x < 0 else ''}inf {unit_text(unit, ascii)}".rstrip()
    if unit == "fraction":
        return f"{100 * x:.1f} %"
    factor, shown = scale_of(x, unit, ascii)
    return f"{significant(x * factor)} {shown}".rstrip()


def format_spread(mean: float | None, spread: float | None, unit: str = "", ascii: bool = False) -> str:
    """`mean ± spread`, the spread in the mean's unit and prefix: 4.10 ms ± 0.210 ms, not ± 210 µs
    ("-" without a mean)."""
    text = format_value(mean, unit, ascii)
    if text == "-" or spread is None or math.isnan(spread) or spread == 0:
        return text
    factor, shown = scale_of(mean or spread, unit, ascii)
    value = f"{significant(spread * factor)} {shown}".rstrip()
    return f"{text} {'+/-' if ascii else '±'} {value}"

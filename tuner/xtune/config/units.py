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


def format_value(x: float | None, unit: str = "", ascii: bool = False) -> str:
    """`x` with its unit, scaled to a readable prefix; "-" when there is no value."""
    if x is None or math.isnan(x):
        return "-"
    if math.isinf(x):
        return f"{'-' if x < 0 else ''}inf {unit}".rstrip()
    if unit in _TIME:
        seconds = x * _TIME[unit]
        name, scale = next(((n, s) for n, s in _TIME_SHOWN if abs(seconds) >= s), _TIME_SHOWN[-1])
        shown = "µs" if name == "us" and not ascii else name
        return f"{significant(seconds / scale)} {shown}"
    if unit in ("bytes/s", "B/s", "bit/s", "bits/s"):
        bits = x * 8 if unit in ("bytes/s", "B/s") else x
        prefix, scale = next(((p, s) for p, s in _SI if abs(bits) >= s), ("", 1.0))
        return f"{significant(bits / scale)} {prefix}bit/s"
    if unit in ("bytes", "B"):
        prefix, scale = next(
            ((p, s) for p, s in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)) if abs(x) >= s), ("", 1)
        )
        return f"{significant(x / scale)} {prefix}B"
    if unit == "fraction":
        return f"{100 * x:.1f} %"
    return f"{significant(x)} {unit}".rstrip()


def format_spread(mean: float | None, spread: float | None, unit: str = "", ascii: bool = False) -> str:
    """`mean ± spread` in the mean's unit and prefix ("-" without a mean)."""
    text = format_value(mean, unit, ascii)
    if text == "-" or spread is None or math.isnan(spread) or spread == 0:
        return text
    value = format_value(spread, unit, ascii)
    if mean and unit in _TIME:  # the spread in the mean's prefix: 4.10 ms ± 0.21 ms, not ± 210 µs
        shown = text.rsplit(" ", 1)[1]
        scale = _TIME["us" if shown == "µs" else shown] / _TIME[unit]
        value = f"{significant(spread / scale)} {shown}"
    return f"{text} {'+/-' if ascii else '±'} {value}"

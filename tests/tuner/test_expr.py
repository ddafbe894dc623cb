"""The expression grammar: precedence, quantile names, functions, SLO lines, and errors."""

from __future__ import annotations

import pytest
from xtune.config import expr

VALUES = {"tcp.srtt.p99": 200.0, "tcp.srtt.p50": 50.0, "a": 6.0, "b": 3.0, "func.bulk_chunk.rate": 180.0}


@pytest.mark.parametrize(
    "text, value",
    [
        ("a + b * 2", 12.0),
        ("(a + b) * 2", 18.0),
        ("a / b - 1", 1.0),
        ("-a + b", -3.0),
        ("- -a", 6.0),
        ("p99(tcp.srtt) / p50(tcp.srtt)", 4.0),
        ("max(a, b) - min(a, b)", 3.0),
        ("abs(b - a)", 3.0),
        ("1e3 * a", 6000.0),
        ("a / 0", float("inf")),
        (".5 * a", 3.0),
    ],
)
def test_evaluate(text: str, value: float) -> None:
    assert expr.evaluate(expr.parse(text), VALUES) == value


def test_signals_read() -> None:
    assert expr.signals(expr.parse("p99(tcp.srtt) + max(a, func.bulk_chunk.rate)")) == {
        "tcp.srtt.p99",
        "a",
        "func.bulk_chunk.rate",
    }


def test_slo_line_with_baseline() -> None:
    line = expr.parse_slo("func.bulk_chunk.rate >= 0.95 * baseline")
    left = expr.evaluate(line.left, VALUES)
    bound = expr.evaluate(line.right, {}, baseline=200.0)
    assert (left, bound) == (180.0, 190.0)
    assert not line.holds(left, bound)
    assert line.margin(left, bound) == pytest.approx(-10 / 190)
    assert expr.parse_slo("a <= 10").holds(6.0, 10.0)


def test_missing_signal_is_reported_by_name() -> None:
    with pytest.raises(expr.MissingSignal, match="tcp.retransmits"):
        expr.evaluate(expr.parse("tcp.retransmits"), VALUES)


@pytest.mark.parametrize(
    "text, words",
    [
        ("a +", "unexpected end"),
        ("a $ b", "unexpected character '$' at column 3"),
        ("(a", "expected ')'"),
        ("a b", "unexpected 'b' at column 3"),
        ("p99(a + b)", "takes one signal name"),
        ("sqrt(a)", "unknown function 'sqrt'"),
        ("max(a)", "takes 2 argument(s)"),
        ("baseline * 2", "only allowed on the right"),
        ("__import__('os')", "unexpected character"),
        ("__import__(a)", "unknown function '__import__'"),
    ],
)
def test_bad_expressions(text: str, words: str) -> None:
    with pytest.raises(expr.ExprError) as err:
        expr.parse(text)
    assert words in str(err.value)


@pytest.mark.parametrize("text", ["a", "a == b", "baseline >= a", "a <= b <= c"])
def test_bad_slo_lines(text: str) -> None:
    with pytest.raises(expr.ExprError):
        expr.parse_slo(text)


def test_feature_reader_reads_names_and_expressions() -> None:
    read = expr.FeatureReader(["f.calls", "f.taken.mean * f.calls", "absent", "a / zero"])
    window = {"f.calls": 4.0, "f.taken.mean": 2.5, "a": 1.0, "zero": 0.0}
    # A product is a per-window sum; an absent signal (alone or inside an expression) reads as 0,
    # and so does a value that is not finite (a division by zero).
    assert read(window) == [4.0, 10.0, 0.0, 0.0]
    assert read({}) == [0.0, 0.0, 0.0, 0.0]


def test_feature_reader_rejects_a_bad_expression_by_column() -> None:
    with pytest.raises(expr.ExprError, match="column"):
        expr.FeatureReader(["a $ b"])


def test_feature_reader_ewma_smooths_over_windows() -> None:
    read = expr.FeatureReader(["ewma(f.taken.mean * f.calls, 3)", "f.calls"])
    assert read.warmup == 3
    assert read({"f.taken.mean": 2.0, "f.calls": 5.0}) == [10.0, 5.0]  # the first window starts it
    assert read({"f.taken.mean": 4.0, "f.calls": 5.0}) == [15.0, 5.0]  # weight 2 / (3 + 1) = 0.5
    assert read({}) == [7.5, 0.0]  # an empty window counts as 0
    again = expr.FeatureReader(["ewma(f.calls, 3)"])
    assert again({"f.calls": 1.0}) == [1.0]  # each reader keeps its own average
    with pytest.raises(expr.ExprError, match="at least 1"):
        expr.FeatureReader(["ewma(a, 0)"])


def test_feature_reader_ewma_inside_an_expression() -> None:
    """A fast-rise, slow-fall envelope: the max of a 2-window and a 12-window average."""
    read = expr.FeatureReader(["max(ewma(f.a * f.b, 2), ewma(f.a * f.b, 12))", "ewma(ewma(f.a, 2), 3)"])
    assert read.warmup == 12
    assert read({"f.a": 1, "f.b": 3}) == [3, 1]
    rise = read({"f.a": 10, "f.b": 3})
    assert rise[0] == pytest.approx(3 + 2 / 3 * 27)  # the fast average leads on the way up
    assert rise[1] == pytest.approx(1 + 0.5 * (2 / 3 * 9))
    fast, slow = rise[0], 3 + 2 / 13 * 27
    for _ in range(3):
        fall = read({"f.a": 1, "f.b": 3})
        fast, slow = fast + 2 / 3 * (3 - fast), slow + 2 / 13 * (3 - slow)
    assert fast < slow and fall[0] == pytest.approx(slow)  # the slow one holds on the way down
    for bad, why in (("ewma(a", "unbalanced"), ("ewma(a)", "expected ewma"), ("max(ewma(a, 2)", "ewma__K")):
        with pytest.raises(expr.ExprError, match=why):
            expr.FeatureReader([bad])

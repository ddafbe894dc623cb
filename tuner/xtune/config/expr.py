"""Expressions over signals, for objectives and SLO lines: a small grammar, never `eval`.

    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/") unary)*
    unary   := "-" unary | atom
    atom    := NUMBER | "baseline" | NAME | FUNC "(" expr ("," expr)* ")" | "(" expr ")"
    slo     := expr ("<=" | ">=" | "<" | ">") expr

NAME is a dotted signal name (`tcp.retransmits`, `func.bulk_chunk.rate`). `p50(x)` / `p99(x)`
name the quantile items `x.p50` / `x.p99` that xobserve publishes; `min`, `max` and `abs` are the
usual functions. `baseline` (only on the right of an SLO line) is the left side's value measured
before the first change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

QUANTILES = ("p50", "p99")
FUNCTIONS: dict[str, tuple[int, Callable[..., float]]] = {
    "min": (2, min),
    "max": (2, max),
    "abs": (1, abs),
}
COMPARATORS = ("<=", ">=", "<", ">")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*")
_EWMA = re.compile(r"ewma\s*\((.+),\s*(-?\d+)\s*\)", re.S)

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
    r"|(?P<op><=|>=|[-+*/(),<>]))"
)


class ExprError(ValueError):
    """An expression that does not parse or cannot be evaluated; names the column."""


class MissingSignal(KeyError):
    """A signal the expression reads is absent from the window."""


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Signal:
    name: str


@dataclass(frozen=True)
class Baseline:
    pass


@dataclass(frozen=True)
class Neg:
    arg: Node


@dataclass(frozen=True)
class BinOp:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Node, ...]


Node = Num | Signal | Baseline | Neg | BinOp | Call


@dataclass(frozen=True)
class Comparison:
    """One SLO line: `left op right`."""

    left: Node
    op: str
    right: Node
    text: str

    def holds(self, left: float, right: float) -> bool:
        return {"<=": left <= right, ">=": left >= right, "<": left < right, ">": left > right}[self.op]

    def margin(self, left: float, right: float) -> float:
        """How far inside the constraint (positive) or outside (negative), relative to `right`."""
        scale = abs(right) or 1.0
        return (right - left) / scale if self.op in ("<=", "<") else (left - right) / scale


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            col = pos + len(text[pos:]) - len(text[pos:].lstrip())
            raise ExprError(f"unexpected character {text[col]!r} at column {col + 1} in {text!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind), m.start(kind) + 1))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str, int]:
        tok = self.peek()
        if tok is None:
            raise ExprError(f"unexpected end of {self.text!r}" + (f" (expected {value!r})" if value else ""))
        if value is not None and tok[1] != value:
            raise ExprError(f"expected {value!r} at column {tok[2]} in {self.text!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def expr(self) -> Node:
        node = self.term()
        while (tok := self.peek()) and tok[1] in "+-" and tok[0] == "op":
            self.take()
            node = BinOp(tok[1], node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while (tok := self.peek()) and tok[1] in ("*", "/"):
            self.take()
            node = BinOp(tok[1], node, self.unary())
        return node

    def unary(self) -> Node:
        tok = self.peek()
        if tok and tok[1] == "-":
            self.take()
            return Neg(self.unary())
        return self.atom()

    def atom(self) -> Node:
        kind, value, col = self.take()
        if kind == "num":
            return Num(float(value))
        if value == "(":
            node = self.expr()
            self.take(")")
            return node
        if kind != "name":
            raise ExprError(f"unexpected {value!r} at column {col} in {self.text!r}")
        if value == "baseline":
            return Baseline()
        nxt = self.peek()
        if nxt is None or nxt[1] != "(":
            return Signal(value)
        if value not in QUANTILES and value not in FUNCTIONS:
            known = ", ".join((*QUANTILES, *FUNCTIONS))
            raise ExprError(f"unknown function {value!r} at column {col} in {self.text!r} (known: {known})")
        self.take("(")
        args = [self.expr()]
        while (tok := self.peek()) and tok[1] == ",":
            self.take()
            args.append(self.expr())
        self.take(")")
        if value in QUANTILES:
            if len(args) != 1 or not isinstance(args[0], Signal):
                raise ExprError(f"{value}() takes one signal name, at column {col} in {self.text!r}")
            return Signal(f"{args[0].name}.{value}")
        arity = FUNCTIONS[value][0]
        if len(args) != arity:
            raise ExprError(f"{value}() takes {arity} argument(s), got {len(args)} in {self.text!r}")
        return Call(value, tuple(args))

    def done(self) -> None:
        tok = self.peek()
        if tok is not None:
            raise ExprError(f"unexpected {tok[1]!r} at column {tok[2]} in {self.text!r}")


def _has_baseline(node: Node) -> bool:
    if isinstance(node, Baseline):
        return True
    if isinstance(node, Neg):
        return _has_baseline(node.arg)
    if isinstance(node, BinOp):
        return _has_baseline(node.left) or _has_baseline(node.right)
    if isinstance(node, Call):
        return any(_has_baseline(a) for a in node.args)
    return False


def parse(text: str) -> Node:
    """Parse an objective expression (no comparison, no `baseline`)."""
    p = _Parser(text)
    node = p.expr()
    p.done()
    if _has_baseline(node):
        raise ExprError(f"'baseline' is only allowed on the right of an SLO line: {text!r}")
    return node


def parse_slo(text: str) -> Comparison:
    """Parse an SLO line `expr OP expr`; `baseline` may appear on the right only."""
    p = _Parser(text)
    left = p.expr()
    tok = p.peek()
    if tok is None or tok[1] not in COMPARATORS:
        raise ExprError(f"an SLO line needs one of {', '.join(COMPARATORS)} in {text!r}")
    p.take()
    right = p.expr()
    p.done()
    if _has_baseline(left):
        raise ExprError(f"'baseline' is only allowed on the right of an SLO line: {text!r}")
    return Comparison(left, tok[1], right, text)


def signals(node: Node) -> set[str]:
    """Names of the signals an expression reads."""
    if isinstance(node, Signal):
        return {node.name}
    if isinstance(node, Neg):
        return signals(node.arg)
    if isinstance(node, BinOp):
        return signals(node.left) | signals(node.right)
    if isinstance(node, Call):
        return set().union(*(signals(a) for a in node.args))
    return set()


def evaluate(node: Node, values: Mapping[str, float], baseline: float | None = None) -> float:
    """Value of an expression over a window's signal values (MissingSignal if one is absent)."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Signal):
        try:
            return float(values[node.name])
        except KeyError:
            raise MissingSignal(node.name) from None
    if isinstance(node, Baseline):
        if baseline is None:
            raise ExprError("'baseline' used before a baseline was measured")
        return baseline
    if isinstance(node, Neg):
        return -evaluate(node.arg, values, baseline)
    if isinstance(node, Call):
        return float(FUNCTIONS[node.func][1](*(evaluate(a, values, baseline) for a in node.args)))
    left = evaluate(node.left, values, baseline)
    right = evaluate(node.right, values, baseline)
    if node.op == "+":
        return left + right
    if node.op == "-":
        return left - right
    if node.op == "*":
        return left * right
    if right == 0:
        return float("inf") if left > 0 else float("-inf") if left < 0 else 0.0
    return left / right


def is_name(text: str) -> bool:
    """Whether the text is a plain signal name (not an expression)."""
    return _NAME.fullmatch(text) is not None


class FeatureReader:
    """From one window's signals to a feature vector, one entry per text: a signal name, an
    expression over signals (e.g. `f.taken.mean * f.rate`, a per-second rate), with `ewma(EXPR, N)`
    anywhere in it: EXPR smoothed over the windows read so far (exponential moving average with
    the weight of an N-window mean, 2 / (N + 1)), for a rate too noisy in one short window; e.g.
    `max(ewma(r, 2), ewma(r, 12))` follows a rise of r within windows and a fall over a dozen. An
    absent signal reads as 0, as it does for a policy. A reader keeps the averages: use one per
    sequence of consecutive windows. `warmup` is the largest N (0 without ewma): the windows an
    average needs before it stands for the sequence rather than for its first window."""

    def __init__(self, texts: Sequence[str]) -> None:
        # Each ewma is a named slot `ewma__K`, filled before the expression around it is read.
        self._ewmas: list[tuple[str, Node | None, float]] = []
        self._keys: list[str] = []  # each ewma's text as written: what a successor matches on
        self._parts: list[tuple[str, Node | None]] = []
        for text in texts:
            outer = self._take_ewmas(text.strip())
            try:
                self._parts.append((outer, None if _NAME.fullmatch(outer) else parse(outer)))
            except ExprError as e:
                raise ExprError(f"{text!r}: {e} (each ewma(...) read as one name `ewma__K`)") from e
        self._state: list[float | None] = [None] * len(self._ewmas)
        self.warmup = max((int(round(2.0 / a - 1)) for _, _, a in self._ewmas), default=0)

    def _take_ewmas(self, text: str) -> str:
        """`text` with each `ewma(EXPR, N)` (innermost first) replaced by its slot's name."""
        while (start := _ewma_start(text)) >= 0:
            depth, end = 0, -1
            for i in range(start + 4, len(text)):
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                if depth == 0:
                    end = i
                    break
            if end < 0:
                raise ExprError(f"{text!r}: unbalanced parentheses after ewma")
            m = _EWMA.fullmatch(text[start : end + 1])
            if not m:
                raise ExprError(f"{text[start : end + 1]!r}: expected ewma(EXPR, N)")
            inner, n = m.group(1).strip(), int(m.group(2))
            key = "".join(text[start : end + 1].split())
            if n < 1:
                raise ExprError(f"{text[start : end + 1]!r}: ewma needs a window count of at least 1")
            if _ewma_start(inner) >= 0:
                inner = self._take_ewmas(inner)
            slot = f"ewma__{len(self._ewmas)}"
            self._keys.append(key)
            self._ewmas.append((inner, None if _NAME.fullmatch(inner) else parse(inner), 2.0 / (n + 1)))
            text = text[:start] + slot + text[end + 1 :]
        return text

    def take_over(self, previous: FeatureReader) -> int:
        """Continue the averages `previous` kept for the same ewma texts (a live model swap: the
        new model's features start where the old ones were, not from their first window).
        Returns how many averages carried over."""
        theirs = dict(zip(previous._keys, previous._state, strict=True))
        carried = 0
        for i, key in enumerate(self._keys):
            if theirs.get(key) is not None:
                self._state[i] = theirs[key]
                carried += 1
        return carried

    def __call__(self, values: Mapping[str, float]) -> list[float]:
        if self._ewmas:
            values = dict(values)
            for i, (name, node, alpha) in enumerate(self._ewmas):
                x = values.get(name, 0.0) if node is None else _finite_or_zero(node, values)
                prev = self._state[i]
                x = x if prev is None else prev + alpha * (x - prev)
                self._state[i] = values[f"ewma__{i}"] = x
        return [
            values.get(name, 0.0) if node is None else _finite_or_zero(node, values)
            for name, node in self._parts
        ]


def _ewma_start(text: str) -> int:
    """Where the first `ewma(` call begins in `text` (as a whole word), or -1."""
    m = re.search(r"(?<![A-Za-z0-9_.])ewma\s*\(", text)
    return m.start() if m else -1


def _finite_or_zero(node: Node, values: Mapping[str, float]) -> float:
    try:
        x = evaluate(node, values)
    except MissingSignal:
        return 0.0
    return x if math.isfinite(x) else 0.0

"""The SLO file schema (pydantic): what to optimize, what must hold, which knobs may move."""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from xtune.config import expr


def _slo_line(line: str) -> str:
    expr.parse_slo(line)
    return line


def _expression(text: str) -> str:
    expr.parse(text)
    return text


SloLine = Annotated[str, AfterValidator(_slo_line)]
Expression = Annotated[str, AfterValidator(_expression)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Objective(Strict):
    """Exactly one of minimize / maximize, an expression over signals; `unit` names what it is
    measured in when the signal catalog does not (`us`, `bytes/s`, `req/s`)."""

    minimize: Expression | None = None
    maximize: Expression | None = None
    unit: str | None = Field(default=None, max_length=16)

    @model_validator(mode="after")
    def _one(self) -> Objective:
        if (self.minimize is None) == (self.maximize is None):
            raise ValueError("give exactly one of 'minimize' or 'maximize'")
        return self

    @property
    def expression(self) -> str:
        return self.minimize if self.minimize is not None else str(self.maximize)

    @property
    def sign(self) -> float:
        """+1 when larger is better."""
        return -1.0 if self.minimize is not None else 1.0


class Knob(Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,47}$")
    backend: Literal["sysctl", "sysfs", "bpf", "sie-user", "sie-kernel"]
    target: str = Field(min_length=1)
    netns: str | None = None
    type: Literal["int", "enum"] = "int"
    range: tuple[int, int] | None = None
    values: list[str] | None = None
    scale: Literal["linear", "log"] = "linear"
    step: int = Field(default=1, ge=1)
    default: int | str | None = None

    @model_validator(mode="after")
    def _shape(self) -> Knob:
        if self.type == "int":
            if self.range is None or self.values is not None:
                raise ValueError("an int knob needs 'range: [min, max]' and no 'values'")
            lo, hi = self.range
            if lo >= hi:
                raise ValueError(f"range [{lo}, {hi}] is empty: min must be below max")
            if self.scale == "log" and lo <= 0:
                raise ValueError("a log-scale range must be positive")
            if self.default is not None and (
                not isinstance(self.default, int) or not lo <= self.default <= hi
            ):
                raise ValueError(f"default {self.default!r} is not an integer in [{lo}, {hi}]")
        else:
            if not self.values or self.range is not None:
                raise ValueError("an enum knob needs 'values: [...]' and no 'range'")
            if self.default is not None and self.default not in self.values:
                raise ValueError(f"default {self.default!r} is not one of {self.values}")
        return self

    def clamp(self, value: float) -> int:
        """The nearest allowed integer value (range and step)."""
        assert self.range is not None
        lo, hi = self.range
        v = lo + round((min(max(value, lo), hi) - lo) / self.step) * self.step
        return int(min(v, hi))

    def grid(self, points: int) -> list[int]:
        """`points` values spread over the range (geometrically on a log scale)."""
        assert self.range is not None
        lo, hi = self.range
        if self.scale == "log":
            raw = [
                math.exp(math.log(lo) + i * (math.log(hi) - math.log(lo)) / (points - 1))
                for i in range(points)
            ]
        else:
            raw = [lo + i * (hi - lo) / (points - 1) for i in range(points)]
        return sorted({self.clamp(v) for v in raw})


class Policy(Strict):
    kind: Literal["bo", "tree", "static", "replay", "random", "grid"] = "bo"
    # Trials, or for `tree` windows: a minute of 1 ms windows is 60000.
    budget: int = Field(default=20, ge=1, le=1_000_000)
    init_trials: int = Field(default=4, ge=1)
    window_ms: int = Field(default=500, ge=1, le=60000)
    settle_ms: int = Field(default=1000, ge=0, le=600000)
    # Windows measured per trial (and for the best values measured again); with a `benchmark`,
    # each window is one run of it: the benchmark runs per trial.
    windows: int = Field(default=4, ge=1, le=1000)
    baseline_windows: int = Field(default=6, ge=2, le=1000)
    # The best values against the start's before they are kept: `confirm_pairs` pairs, measured in
    # turns, of `confirm_windows` windows each (default: `windows`); kept when the one-sided
    # `confirm_confidence` lower bound of the mean gain is above zero (tuning/confirm.py). An even
    # count cancels a steady drift: each side goes first equally often.
    confirm_pairs: int = Field(default=4, ge=1, le=100)
    confirm_windows: int | None = Field(default=None, ge=1, le=1000)
    confirm_confidence: float = Field(default=0.9, gt=0.5, lt=1.0)
    patience: int | None = Field(default=None, ge=1)
    seed: int | None = None
    model: str | None = None
    # tree: windows in a row a new setting must win before it replaces the current one.
    hold: int = Field(default=1, ge=1, le=1000)
    profile: dict[str, int | str] | None = None
    recording: str | None = None
    grid_points: int = Field(default=5, ge=2, le=100)
    # `log`: BO models log(objective) (objectives spanning orders of magnitude, e.g. latencies).
    objective_scale: Literal["linear", "log"] = "linear"

    @model_validator(mode="after")
    def _needs(self) -> Policy:
        if self.kind == "tree" and not self.model:
            raise ValueError("policy 'tree' needs 'model' (a file written by `xtune train`)")
        if self.kind == "static" and not self.profile:
            raise ValueError("policy 'static' needs 'profile' (knob name -> value)")
        if self.kind == "replay" and not self.recording:
            raise ValueError("policy 'replay' needs 'recording' (a recording with decisions)")
        return self


class Guard(Strict):
    watch_windows: int = Field(default=3, ge=1, le=1000)
    tolerance: float = Field(default=3.0, ge=0)
    min_margin: float = Field(default=0.02, ge=0)
    violations: int = Field(default=2, ge=1)
    action: Literal["rollback", "warn"] = "rollback"
    on_exit: Literal["keep", "restore"] = "restore"

    @model_validator(mode="after")
    def _fits(self) -> Guard:
        if self.violations > self.watch_windows:
            raise ValueError(
                f"violations ({self.violations}) cannot exceed watch_windows ({self.watch_windows})"
            )
        return self


class Workload(Strict):
    command: list[str] = Field(min_length=1)
    netns: str | None = None
    ready_ms: int = Field(default=500, ge=0)
    stop_timeout_ms: int = Field(default=3000, ge=0)
    restart_on_change: bool = False


class BenchMetric(Strict):
    """A figure of one benchmark run, read in expressions as `bench.<name>`.

    `regex`: a Python pattern with a named group `value` (searched in stdout, then stderr);
    `json`: a dotted path into stdout parsed as JSON, or into its last line that is a JSON object
    (numbers index lists); `promql`: a PromQL expression the benchmark's `prometheus` server
    evaluates once every target it scrapes has been scraped after the run ended, one series or a
    scalar (`$__range`: back from then to every target's last scrape before the run started;
    `$__run_seconds`: the run's own length).
    `scale` multiplies. `unit` is the unit after scaling (`us`, `req/s`).
    """

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,47}$")
    regex: str | None = None
    json_path: str | None = Field(default=None, alias="json", pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
    promql: str | None = Field(default=None, min_length=1)
    scale: float = 1.0
    unit: str = Field(default="", max_length=16)

    @model_validator(mode="after")
    def _one(self) -> BenchMetric:
        if sum(x is not None for x in (self.regex, self.json_path, self.promql)) != 1:
            raise ValueError("give exactly one of 'regex', 'json' or 'promql'")
        if self.regex is not None:
            try:
                pattern = re.compile(self.regex)
            except re.error as e:
                raise ValueError(f"regex {self.regex!r} does not compile: {e}") from None
            if "value" not in pattern.groupindex:
                raise ValueError(f"regex {self.regex!r} has no named group (?P<value>...)")
        return self


class PrometheusSource(Strict):
    """The Prometheus server the `promql` metrics query (its HTTP API), e.g. one scraping the
    application's exporter; `timeout_s` bounds the wait for the scrapes after a run and each query."""

    url: str = Field(pattern=r"^https?://[^\s/]+(/\S*)?$")
    timeout_s: float = Field(default=15.0, gt=0)


class Benchmark(Strict):
    """A command run once per measurement window (its output is the window): a load generator
    whose own figures (requests/s, latency percentiles) the objective and SLO lines read, from its
    output or from the application's exporter through Prometheus."""

    command: list[str] = Field(min_length=1)
    netns: str | None = None
    timeout_s: float = Field(default=120.0, gt=0)
    metrics: list[BenchMetric] = Field(min_length=1)
    prometheus: PrometheusSource | None = None

    @model_validator(mode="after")
    def _unique(self) -> Benchmark:
        names = [m.name for m in self.metrics]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"metric names must be unique: {dup} repeated")
        queried = [m.name for m in self.metrics if m.promql is not None]
        if queried and self.prometheus is None:
            raise ValueError(f"metrics {queried} have a promql query: give 'prometheus: {{url: ...}}'")
        if self.prometheus is not None and not queried:
            raise ValueError("'prometheus' is given but no metric has a promql query")
        return self


class Record(Strict):
    path: str


class Signals(Strict):
    shm: str = "xtune.signals"
    zmq: str | None = None


class SloFile(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    description: str = ""
    objective: Objective
    slo: list[SloLine] = Field(default_factory=list)
    knobs: list[Knob] = Field(min_length=1)
    policy: Policy = Field(default_factory=Policy)
    guard: Guard = Field(default_factory=Guard)
    workload: Workload | None = None
    benchmark: Benchmark | None = None
    record: Record | None = None
    signals: Signals = Field(default_factory=Signals)
    xrtd_socket: str | None = None

    @model_validator(mode="after")
    def _unique(self) -> SloFile:
        names = [k.name for k in self.knobs]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"knob names must be unique: {sorted(dup)} repeated")
        for key, value in (self.policy.profile or {}).items():
            if key not in names:
                raise ValueError(f"policy.profile names unknown knob {key!r} (knobs: {names})")
            del value
        return self

    def unknown_reads(self) -> list[tuple[tuple[str | int, ...], str]]:
        """(field path, problem) for each expression that reads what a benchmark file lacks: with
        a benchmark, each window is one run and expressions read only its metrics."""
        if self.benchmark is None:
            return []
        known = {f"bench.{m.name}" for m in self.benchmark.metrics}
        field = "minimize" if self.objective.minimize is not None else "maximize"
        reads: list[tuple[tuple[str | int, ...], str, set[str]]] = [
            (
                ("objective", field),
                self.objective.expression,
                expr.signals(expr.parse(self.objective.expression)),
            )
        ]
        for i, c in enumerate(self.comparisons()):
            reads.append((("slo", i), c.text, expr.signals(c.left) | expr.signals(c.right)))
        return [
            (loc, f"{text!r} reads {sorted(names - known)}, not a metric of the benchmark ({sorted(known)})")
            for loc, text, names in reads
            if names - known
        ]

    def knob(self, name: str) -> Knob:
        return next(k for k in self.knobs if k.name == name)

    def comparisons(self) -> list[expr.Comparison]:
        return [expr.parse_slo(line) for line in self.slo]

    def defaults(self) -> dict[str, int]:
        """Each int knob's default (its range minimum when none is given)."""
        out = {}
        for k in self.knobs:
            if k.type == "int" and k.range is not None:
                out[k.name] = int(k.default) if isinstance(k.default, int) else k.range[0]
        return out

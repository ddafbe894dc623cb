"""A benchmark's own figures as signals: run its command once, parse the metrics the SLO file names.

Each run is one measurement window; its values are `bench.<metric>` for the objective and the
SLO lines, from the run's output or from Prometheus (promql.py). A metric the output or the
server lacks (or that is not a finite number) is a failed run, raised as `MetricMissing` naming
the metric and what was expected, never read as zero.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from xtune.config.schema import Benchmark, BenchMetric
from xtune.tuning.promql import QueryFailed, query_metrics


class MetricMissing(RuntimeError):
    """A benchmark run whose output lacks a metric (or that failed): the trial fails."""


@dataclass
class BenchRun:
    values: dict[str, float]
    start_ns: int
    end_ns: int
    output: str


def _json_value(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            raise KeyError(part)
    return doc


def _json_doc(stdout: str) -> Any:
    """The output as JSON, or its last line that is a JSON object (a tool that prints its own
    text before a summary hook's JSON line, like wrk with a Lua `done`)."""
    try:
        return json.loads(stdout)
    except json.JSONDecodeError:
        lines = [line for line in stdout.splitlines() if line.lstrip().startswith("{")]
        if not lines:
            raise
        return json.loads(lines[-1])


def parse_metric(metric: BenchMetric, stdout: str, stderr: str = "") -> float:
    """One metric's value from a run's output (MetricMissing says which and why)."""
    if metric.regex is not None:
        for text in (stdout, stderr):
            m = re.search(metric.regex, text, re.MULTILINE)
            if m is not None and m.group("value") is not None:
                raw: Any = m.group("value")
                break
        else:
            raise MetricMissing(f"metric {metric.name}: regex {metric.regex!r} matched nothing in the output")
    else:
        assert metric.json_path is not None
        try:
            raw = _json_value(_json_doc(stdout), metric.json_path)
        except json.JSONDecodeError as e:
            raise MetricMissing(f"metric {metric.name}: the output has no JSON object ({e})") from None
        except KeyError as e:
            raise MetricMissing(
                f"metric {metric.name}: no {e.args[0]!r} in JSON path {metric.json_path!r}"
            ) from None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise MetricMissing(f"metric {metric.name}: {raw!r} is not a number") from None
    if not math.isfinite(value):
        raise MetricMissing(f"metric {metric.name}: {raw!r} is not finite")
    return value * metric.scale


def parse_output(config: Benchmark, stdout: str, stderr: str = "") -> dict[str, float]:
    """Every metric of the file read from the output as `bench.<name>` (not the promql ones)."""
    return {f"bench.{m.name}": parse_metric(m, stdout, stderr) for m in config.metrics if m.promql is None}


def run_benchmark(config: Benchmark) -> BenchRun:
    """Run the command once (inside `netns` if given) and parse its metrics."""
    cmd = list(config.command)
    if config.netns:
        cmd = ["ip", "netns", "exec", config.netns, *cmd]
    start, start_wall = time.monotonic_ns(), time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=config.timeout_s)
    except subprocess.TimeoutExpired:
        raise MetricMissing(f"benchmark {cmd[0]} did not finish in {config.timeout_s:g} s") from None
    except OSError as e:
        raise MetricMissing(f"benchmark {cmd[0]} could not start: {e.strerror}") from None
    end, end_wall = time.monotonic_ns(), time.time()
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise MetricMissing(f"benchmark {cmd[0]} exited with {proc.returncode}: {tail}")
    values = parse_output(config, proc.stdout, proc.stderr)
    queried = [m for m in config.metrics if m.promql is not None]
    if queried:
        assert config.prometheus is not None  # the schema requires it
        try:
            values |= query_metrics(config.prometheus, queried, start_wall, end_wall)
        except QueryFailed as e:
            raise MetricMissing(str(e)) from None
    return BenchRun(values, start, end, proc.stdout)

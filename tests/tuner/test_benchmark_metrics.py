"""Benchmark metrics: regex and JSON paths over real tools' output; a missing metric fails, never 0."""

from __future__ import annotations

import pytest
from xtune.config.schema import Benchmark
from xtune.tuning.benchmark import MetricMissing, parse_output, run_benchmark

WRK = """Running 1s test @ http://10.1.0.2/
  2 threads and 64 connections
Requests/sec:  24780.50
Transfer/sec:     20.16MB
{"requests_per_s": 24780.504, "latency_p50_us": 280, "latency_p99_us": 103730, "errors": 0}
"""
HEADER = '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms"'
REDIS = (
    HEADER
    + ""","max_latency_ms"
"SET","38834.95","0.876","0.152","0.775","1.815","2.743","4.871"
"GET","49751.24","0.660","0.192","0.623","1.063","1.239","5.511"
"""
)


def bench(*metrics: dict, command: list[str] | None = None) -> Benchmark:
    return Benchmark.model_validate({"command": command or ["true"], "metrics": list(metrics)})


def test_wrk_json_line_after_text() -> None:
    b = bench(
        {"name": "rps", "json": "requests_per_s"},
        {"name": "p99_ms", "json": "latency_p99_us", "scale": 0.001},
        {"name": "text_rps", "regex": r"Requests/sec:\s+(?P<value>[0-9.]+)"},
    )
    assert parse_output(b, WRK) == {
        "bench.rps": 24780.504,
        "bench.p99_ms": 103.73,
        "bench.text_rps": 24780.50,
    }


def test_redis_csv_columns() -> None:
    b = bench(
        {"name": "get", "regex": r'^"GET","(?P<value>[0-9.]+)"'},
        {"name": "get_p99", "regex": r'^"GET"(?:,"[^"]*"){5},"(?P<value>[0-9.]+)"'},
    )
    assert parse_output(b, REDIS) == {"bench.get": 49751.24, "bench.get_p99": 1.239}


@pytest.mark.parametrize(
    ("metric", "output", "words"),
    [
        ({"name": "rps", "regex": r"Requests/sec:\s+(?P<value>[0-9.]+)"}, "nothing here", "matched nothing"),
        ({"name": "rps", "json": "latency.p99"}, WRK, "no 'latency'"),
        ({"name": "rps", "json": "a"}, "not json at all", "no JSON object"),
        ({"name": "rps", "json": "a"}, '{"a": "fast"}', "'fast' is not a number"),
        ({"name": "rps", "json": "a"}, '{"a": NaN}', "not finite"),
    ],
)
def test_missing_metric_is_an_error_naming_it(metric: dict, output: str, words: str) -> None:
    with pytest.raises(MetricMissing, match="metric rps") as err:
        parse_output(bench(metric), output)
    assert words in str(err.value)


def test_failed_command_is_a_failed_run() -> None:
    with pytest.raises(MetricMissing, match="exited with 3"):
        run_benchmark(bench({"name": "x", "json": "a"}, command=["sh", "-c", "echo boom >&2; exit 3"]))
    with pytest.raises(MetricMissing, match="could not start"):
        run_benchmark(bench({"name": "x", "json": "a"}, command=["/nonexistent/xtune-tool"]))
    run = run_benchmark(bench({"name": "x", "json": "a.1"}, command=["echo", '{"a": [1, 2.5]}']))
    assert run.values == {"bench.x": 2.5}


@pytest.mark.parametrize(
    ("metric", "words"),
    [
        ({"name": "x", "regex": "(?P<value>[0-9]+", "json": "a"}, "exactly one of"),
        ({"name": "x", "regex": "(?P<value>[0-9]+"}, "does not compile"),
        ({"name": "x", "json": "a..b"}, "String should match pattern"),
    ],
)
def test_bad_metric_specs(metric: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        bench(metric)

"""Benchmark metrics from Prometheus: Debian's redis-server, its exporter (prometheus-redis-exporter)
scraped by a real Prometheus, queried after each redis-benchmark run; a query without one finite
number fails the run, naming the metric."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from xtune.config.schema import Benchmark
from xtune.host.services import free_port
from xtune.testing.prometheus import PrometheusServer
from xtune.tuning.benchmark import MetricMissing, run_benchmark
from xtune.tuning.promql import QueryFailed, single_value

SETS = 20000


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed (scripts/apt-packages.txt lists it): run `make setup`")
    return path


class Served:
    """A redis-server with its exporter, scraped every second by a Prometheus of its own."""

    def __init__(self, root: Path) -> None:
        self.redis_port, self.exporter_port = free_port(), free_port()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.prometheus = PrometheusServer(root / "prometheus", root / "sd")
        self.root = root

    def start(self) -> None:
        redis = [binary("redis-server"), "--port", str(self.redis_port), "--bind", "127.0.0.1"]
        redis += ["--save", "", "--appendonly", "no", "--dir", str(self.root)]
        exporter = [binary("prometheus-redis-exporter"), f"--redis.addr=redis://127.0.0.1:{self.redis_port}"]
        exporter += [f"--web.listen-address=127.0.0.1:{self.exporter_port}"]
        for cmd in (redis, exporter):
            self.procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # One SET before the first scrape: a counter has a series (and a sample) before any run.
        cli = [binary("redis-cli"), "-p", str(self.redis_port)]
        deadline = time.monotonic() + 30
        seed = [*cli, "set", "seed", "1"]
        while subprocess.run(seed, capture_output=True, text=True).stdout.strip() != "OK":
            assert time.monotonic() < deadline, "redis-server did not answer within 30 s"
            time.sleep(0.1)
        self.prometheus.start()
        target = f"127.0.0.1:{self.exporter_port}"
        (self.root / "sd" / "redis.json").write_text(json.dumps([{"targets": [target]}]))
        self.prometheus.until("the exporter reads redis", "redis_up", lambda r: r and r[0]["value"][1] == "1")

    def close(self) -> None:
        self.prometheus.close()
        for proc in reversed(self.procs):
            proc.terminate()
            proc.wait(10)

    def bench(self, *metrics: dict, url: str | None = None) -> Benchmark:
        command = ["redis-benchmark", "-p", str(self.redis_port), "-t", "set", "-n", str(SETS), "--csv"]
        return Benchmark.model_validate(
            {"command": command, "metrics": list(metrics), "prometheus": {"url": url or self.prometheus.url}}
        )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = Served(tmp_path_factory.mktemp("redis-prom"))
    try:
        s.start()
        yield s
    finally:
        s.close()


def test_a_query_reads_the_exporter_after_the_run(served: Served) -> None:
    """The count of SETs as the exporter saw it once the run was over: exactly what redis-benchmark
    sent (after the seed's one), run after run; its increase over `$__range` is the run's SETs
    however short the run, and divided by `$__run_seconds` a rate beside the benchmark's own."""
    counter = 'redis_commands_total{cmd="set"}'
    bench = served.bench(
        {"name": "sets", "promql": f"max_over_time({counter}[$__range])"},
        {"name": "set_increase", "promql": f"increase({counter}[$__range])"},
        {"name": "set_rate", "promql": f"increase({counter}[$__range]) / $__run_seconds"},
        {"name": "rps", "regex": r'^"SET","(?P<value>[0-9.]+)"'},
    )
    for n in (1, 2):
        run = run_benchmark(bench)
        assert run.values["bench.sets"] == 1 + n * SETS
        assert abs(run.values["bench.set_increase"] - SETS) <= 0.01 * SETS, run.values
        assert run.values["bench.set_rate"] > 0 and run.values["bench.rps"] > 0


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ('redis_commands_total{cmd="no_such_command"}', "matched no series"),
        ("redis_commands_total", "aggregate them to one"),
        ("sum(redis_commands_total", "Prometheus refused"),
        ("redis_commands_total[1m]", "gave a matrix"),
        ("0 / 0", "not finite"),
    ],
)
def test_a_query_without_one_number_fails_the_run_naming_the_metric(
    served: Served, query: str, words: str
) -> None:
    with pytest.raises(MetricMissing, match="^metric q: ") as err:
        run_benchmark(served.bench({"name": "q", "promql": query}))
    assert words in str(err.value)


def test_a_server_that_does_not_answer_fails_the_run(served: Served) -> None:
    bench = served.bench({"name": "q", "promql": "vector(1)"}, url=f"http://127.0.0.1:{free_port()}")
    bench.prometheus.timeout_s = 2  # type: ignore[union-attr]
    started = time.monotonic()
    with pytest.raises(MetricMissing, match="^metric q: Prometheus at .* did not answer"):
        run_benchmark(bench)
    assert time.monotonic() - started < 60


@pytest.mark.fast
def test_single_value_of_each_answer_shape() -> None:
    """Unit: Prometheus's answer shapes (its API's JSON), without a server."""
    assert single_value({"resultType": "scalar", "result": [1.0, "2.5"]}, "q") == 2.5
    assert single_value({"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "7"]}]}, "q") == 7
    for data, words in [
        ({"resultType": "vector", "result": []}, "no series"),
        ({"resultType": "string", "result": [1.0, "x"]}, "gave a string"),
        ({"resultType": "scalar", "result": [1.0, "+Inf"]}, "not finite"),
        ({"resultType": "scalar", "result": [1.0]}, "holds no number"),
    ]:
        with pytest.raises(QueryFailed, match=words):
            single_value(data, "q")


PROMQL, SERVER = {"name": "x", "promql": "up"}, {"url": "http://h:9090"}


@pytest.mark.fast
@pytest.mark.parametrize(
    ("benchmark", "words"),
    [
        ({"metrics": [PROMQL]}, "have a promql query: give 'prometheus"),
        ({"metrics": [{"name": "x", "json": "a"}], "prometheus": SERVER}, "no metric has a promql"),
        ({"metrics": [{**PROMQL, "json": "a"}]}, "exactly one of 'regex', 'json' or 'promql'"),
        ({"metrics": [PROMQL], "prometheus": {"url": "h:9090"}}, "String should match"),
    ],
)
def test_prometheus_settings_are_checked(benchmark: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        Benchmark.model_validate({"command": ["true"], **benchmark})

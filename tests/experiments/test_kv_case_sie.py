"""The key-value case's perf-const (experiments/cases/perf_const.py): BO's best values split into
sysctl settings and perf-consts, a binary of another build refused before anything starts, a
contender whose perf-const cannot be armed recorded as a failed run (never a stock one), and, live,
a contender's PROTO_IOBUF_LEN armed through xrtd in the restarted server for its run and put back
byte-exact before the server stops."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from cases import kv
from cases.interleave import interleave
from cases.perf_const import LiveConst, NotTheAnalyzedBinary, PerfConst, split
from cases.profiles import Contender
from cases.run import run_case
from cases.servers import Redis
from xtune.config import load
from xtune.config.schema import Benchmark, BenchMetric, Knob
from xtune.host.netns import VethPair
from xtune.host.services import Services
from xtune.knobs.actuator import Actuator
from xtune.knobs.table import KnobClient
from xtune.sie import scope as sc
from xtune.sie.attach import spans_hold_original
from xtune.sie.elfcode import file_build_id

OTHER_BUILD = Path("/bin/true")  # any executable whose build id is not the scope table's


def slo_knobs() -> dict[str, Knob]:
    variables = {
        **kv.CASE.variables(VethPair(), Path("/nonexistent"), True),
        **kv.IOBUF.variables(4242, Path("/tmp/iobuf.plan")),
        "BUDGET": "1",
    }
    slo = load(kv.CASE.bo_file, variables)
    assert slo.workload is None, "the server runs the SIE arming: xtune must not restart it"
    return {k.name: k for k in slo.knobs}


def test_bo_file_tunes_the_running_server_over_the_analysis_range() -> None:
    knobs = slo_knobs()
    iobuf = knobs[kv.IOBUF.knob]
    const = kv.IOBUF.table().const(kv.IOBUF.name)
    assert (iobuf.backend, iobuf.target) == ("sie-user", "4242:/tmp/iobuf.plan")
    assert iobuf.range == (const.min_value, const.max_value) and iobuf.scale == "log"
    bound_at_listen = {"net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_rmem[1]",
                       "net.ipv4.tcp_wmem[1]"}  # fmt: skip
    assert not bound_at_listen & {k.target for k in knobs.values()}


def test_split_keeps_perf_consts_by_knob_and_sysctls_by_target() -> None:
    knobs = slo_knobs()
    best: dict[str, int | str] = {"proto_iobuf_len": 32768, "netdev_backlog": 2048, "fin_timeout": 30}
    settings, consts = split(best, knobs)
    assert consts == {"proto_iobuf_len": 32768}
    assert settings == {"net.core.netdev_max_backlog": 2048, "net.ipv4.tcp_fin_timeout": 30}
    with pytest.raises(ValueError, match="proto_iobuf_len"):
        split({"proto_iobuf_len": "big"}, knobs)


def test_another_build_is_refused_naming_both_build_ids() -> None:
    other = PerfConst(kv.IOBUF.name, kv.IOBUF.knob, kv.IOBUF.scope, lambda: OTHER_BUILD)
    with pytest.raises(NotTheAnalyzedBinary) as e:
        other.checked_binary()
    assert file_build_id(OTHER_BUILD) in str(e.value)
    assert kv.IOBUF.table().binary.build_id in str(e.value)


@pytest.mark.root
@pytest.mark.timeout(60)
def test_case_refuses_before_starting_a_server_of_another_build() -> None:
    other = PerfConst(kv.IOBUF.name, kv.IOBUF.knob, kv.IOBUF.scope, lambda: OTHER_BUILD)
    case = dataclasses.replace(kv.CASE, perf_const=other)
    with pytest.raises(NotTheAnalyzedBinary):
        run_case(case, reps=1, budget=1, quick=True, log=lambda _m: None, only={"defaults"})


class NoKnobs(Actuator):
    """An actuator over no knobs (the runs below set only the perf-const)."""

    def __init__(self) -> None:
        self.current: dict = {}

    def apply(self, values: dict, reason: str) -> dict:
        assert not values
        return {}


BENCH_NEVER_RUN = Benchmark(command=["false"], metrics=[BenchMetric(name="x", regex="(?P<value>1)")])


def test_a_perf_const_that_cannot_be_armed_fails_the_run_with_its_reason() -> None:
    c = Contender("bo", "test", perf_consts={"proto_iobuf_len": 32768})
    runs = interleave(NoKnobs(), {}, {}, [c], None, BENCH_NEVER_RUN, "bench.x", 1, lambda _m: None, None)
    assert len(runs["bo"]) == 1 and "objective" not in runs["bo"][0]
    assert "proto_iobuf_len" in runs["bo"][0]["failed"]


@pytest.mark.root
@pytest.mark.slow  # builds the stock server on first use (about a minute on 2 cores), then seconds
@pytest.mark.timeout(300)
def test_contender_runs_with_the_perf_const_armed_and_leaves_the_code_original(tmp_path: Path) -> None:
    binary = kv.IOBUF.checked_binary()
    table: sc.ScopeTable = kv.IOBUF.table()
    plan = kv.IOBUF.write_plan(tmp_path / "iobuf.plan")
    with VethPair() as pair, Services(families=[], observe=False, allow=[f"sie-user:{binary}"]) as svc:
        (tmp_path / "server").mkdir()
        server = Redis("redis", pair.server, 6379, tmp_path / "server", binary=str(binary))
        bench = Benchmark(
            command=["redis-benchmark", "-h", pair.server_addr, "-c", "4", "-P", "32", "-d", "4096"]
            + ["-n", "20000", "-t", "set", "--csv"],
            netns=pair.client,
            metrics=[BenchMetric(name="set", regex='^"SET","(?P<value>[0-9.]+)"')],
        )
        seen: list[int] = []

        class Watching(LiveConst):
            def armed(self, pid: int, value: int, why: str):  # type: ignore[no-untyped-def]
                seen.append(pid)
                return super().armed(pid, value, why)

        live = Watching(kv.IOBUF, plan, svc.xrtd_socket)
        sie = Contender("sie", "test", perf_consts={kv.IOBUF.knob: 32768})
        wrong = Contender("too-big", "test", perf_consts={kv.IOBUF.knob: 10**6})
        try:
            runs = interleave(NoKnobs(), {}, {}, [sie, wrong], server, bench, "bench.set", 1,
                              lambda _m: None, live)  # fmt: skip
            assert server.proc is not None
            assert spans_hold_original(server.proc.pid, table), "the code after the refused value"
            with KnobClient(svc.xrtd_socket) as client:
                assert client.list() == [], "every run's knob unregistered (disarmed)"
        finally:
            server.stop()
    assert runs["sie"][0]["perf_consts"] == {kv.IOBUF.knob: 32768} and runs["sie"][0]["objective"] > 0
    assert "objective" not in runs["too-big"][0] and "PROTO_IOBUF_LEN" in runs["too-big"][0]["failed"]
    assert len(set(seen)) == 2, "each contender's run arms its own server process"

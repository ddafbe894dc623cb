"""The bpftune guest benchmark's reading of the guest console: per contender and repetition the
measured run and the limits after it, bpftune's logged changes, the restore checks; a contender
missing a repetition is an error naming it, never a shorter average."""

from __future__ import annotations

import pytest
from bench_bpftune import CONTENDERS, summarize


def visit(c: str, rep: int, kbit: int, rmem_max: int, restored: int = 1) -> str:
    return (
        f"XB-RUN {c} {rep} {kbit} 3\n"
        f"XB-VALUES {c} {rep} srv 4096,131072,{rmem_max} 4096,16384,4194304 \n"
        f"XB-VALUES {c} {rep} cli 4096,131072,6291456 4096,16384,8388608 \n"
        f"XB-RESTORED {c} {rep} {restored}\n"
    )


def console(reps: int, restored_last: int = 1) -> str:
    text = "XB-BOOTED 6.1.0-56-amd64 reps=2\nXB-PING round-trip min/avg/max = 100.5/120.0/150.25 ms\n"
    for rep in range(1, reps + 1):
        text += f"XB-TUNERS {rep} 9\n"
        text += visit("defaults", rep, 100_000, 6291456)
        text += visit("bpftune", rep, 150_000, 12288000)
        text += (
            f"XB-LOG {rep} bpftune: Due to need to increase max buffer size to maximize throughput "
            "change net.ipv4.tcp_rmem(min default max) from (4096 131072 6291456) -> (4096 131072 7864320)\n"
        )
        text += visit("xtune-bo", rep, 200_000, 16777216, restored_last if rep == reps else 1)
    return text


def test_reads_runs_limits_changes_and_restores() -> None:
    s = summarize(console(2), 2)
    assert set(s["contenders"]) == set(CONTENDERS)
    assert s["contenders"]["defaults"]["throughput_mbit_s_per_rep"] == [100.0, 100.0]
    assert s["over_defaults"]["bpftune"]["per_rep"] == [1.5, 1.5]
    assert s["over_defaults"]["xtune-bo"]["throughput_ratio"]["mean"] == 2.0
    assert s["contenders"]["bpftune"]["srv_tcp_rmem_max"]["mean"] == 12288000
    assert s["contenders"]["xtune-bo"]["cli_tcp_wmem_max"]["mean"] == 8388608
    assert s["tunables_changed"] == ["net.ipv4.tcp_rmem"]
    assert s["bpftune_changes_per_rep"] == {"1": 1, "2": 1}
    assert s["bpftune_tuners_initialized_min"] == 9
    assert (s["visits"], s["visits_restored"], s["restored_every_visit"]) == (6, 6, True)
    assert s["guest_ping_ms"] == {"min": 100.5, "avg": 120.0, "max": 150.25}
    assert s["guest_kernel"] == "6.1.0-56-amd64"


def test_a_visit_left_changed_is_counted() -> None:
    s = summarize(console(2, restored_last=0), 2)
    assert (s["visits_restored"], s["restored_every_visit"]) == (5, False)


def test_a_missing_repetition_names_the_contender() -> None:
    text = console(2).replace("XB-RUN bpftune 2 150000 3\n", "")
    with pytest.raises(RuntimeError, match=r"contender bpftune: runs for repetitions \[1\]"):
        summarize(text, 2)

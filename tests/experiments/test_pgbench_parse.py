"""The database case's pgbench parser: pgbench 15's summary read into figures; a line that does
not read as expected, or a figure missing, is an error naming the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from cases.pgbench_json import PgbenchOutputError, latencies_us, p99_ms, parse_summary

SUMMARY = """\
pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: select only>
scaling factor: 10
query mode: simple
number of clients: 8
number of threads: 2
maximum number of tries: 1
duration: 2 s
number of transactions actually processed: 45934
number of failed transactions: 0 (0.000%)
latency average = 0.314 ms
latency stddev = 0.238 ms
initial connection time = 21.347 ms
tps = 22999.129784 (without initial connection time)
"""


def test_summary_figures() -> None:
    assert parse_summary(SUMMARY) == {
        "transactions": 45934,
        "failed": 0,
        "latency_avg_ms": 0.314,
        "latency_stddev_ms": 0.238,
        "tps": 22999.129784,
    }


def test_malformed_line_names_line_and_field() -> None:
    bad = SUMMARY.replace("latency average = 0.314 ms", "latency average = nan ms")
    with pytest.raises(PgbenchOutputError, match=r"line 11 'latency average = nan ms': field latency_avg_ms"):
        parse_summary(bad)


def test_missing_figure_is_an_error_not_zero() -> None:
    without_tps = "".join(line for line in SUMMARY.splitlines(True) if not line.startswith("tps ="))
    with pytest.raises(PgbenchOutputError, match=r"no line for field tps \('tps ='\)"):
        parse_summary(without_tps)


def test_transaction_log_p99(tmp_path: Path) -> None:
    log = tmp_path / "tx.123"
    log.write_text("".join(f"{i % 8} {i} {100 + i} 0 1764000000 {i}\n" for i in range(1000)))
    assert p99_ms(latencies_us(log)) == 1.09  # the 991st of 100..1099 us
    log.write_text("0 1 250 0 1764000000 1\n0 2 failed 0 1764000000 2\n")
    with pytest.raises(PgbenchOutputError, match=r"tx.123 line 2 .*field time_us"):
        latencies_us(log)

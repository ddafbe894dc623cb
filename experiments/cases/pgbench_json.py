"""The database case's load: pgbench against a case server, its own figures as one JSON line.

    pgbench_json.py HOST PORT SECONDS

Waits until the server accepts connections (it may still be in initdb or starting after a
restart), makes the pgbench tables (scale 10, generated server-side) the first time a cluster is
seen, then runs select-only pgbench: 8 clients, 2 threads, SECONDS long. Prints
`{"tps", "latency_avg_ms", "latency_stddev_ms", "latency_p99_ms", "transactions", "failed"}`
for the case's SLO file; tps, average and stddev are pgbench's summary lines, p99 comes from its
per-transaction log (`-l`). A line that does not read as expected is an error naming the line and
the field, and a missing figure is an error too: the script exits non-zero and the trial fails
(never a zero).

Why select-only: the contenders change network sysctls (socket buffers, backlogs) in the server's
namespace and a few vm/kernel ones host-wide. Each select-only transaction is one small query and
reply over the veth, so the path between client and server is most of its cost; TPC-B-like
transactions wait for the WAL flush at commit and would mostly measure the disk, and they grow the
history table run after run, so repetitions would not measure the same database.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCALE = 10
CLIENTS, THREADS = 8, 2
USER, DATABASE = "postgres", "postgres"
READY_TIMEOUT_S = 60.0


class PgbenchOutputError(ValueError):
    """pgbench's output does not read as expected (which line, which field)."""


NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
# Field -> its summary line: the label it starts with, then a number, then what follows the number.
SUMMARY = {
    "transactions": ("number of transactions actually processed:", ""),
    "failed": ("number of failed transactions:", r" \([0-9.]+%\)"),
    "latency_avg_ms": ("latency average =", " ms"),
    "latency_stddev_ms": ("latency stddev =", " ms"),
    "tps": ("tps =", r" \(without initial connection time\)"),
}


def parse_summary(text: str) -> dict[str, float]:
    """pgbench's summary figures (see SUMMARY); PgbenchOutputError names the line and field."""
    out: dict[str, float] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        for field, (label, after) in SUMMARY.items():
            if not line.startswith(label):
                continue
            pattern = f"{re.escape(label)} {NUMBER}{after}"
            m = re.fullmatch(pattern, line)
            if m is None:
                raise PgbenchOutputError(f"line {n} {line!r}: field {field}: does not match {pattern!r}")
            out[field] = float(m.group(1))
    missing = [f"{field} ({SUMMARY[field][0]!r})" for field in SUMMARY if field not in out]
    if missing:
        raise PgbenchOutputError(f"pgbench's output has no line for field {', '.join(missing)}")
    return out


def latencies_us(path: Path) -> list[int]:
    """The per-transaction latencies (µs) of one `pgbench -l` file: `client tx time_us script
    epoch_s epoch_us` per line (pgbench 15, no --aggregate-interval)."""
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split()
        if len(fields) < 6 or not fields[2].isdigit():
            raise PgbenchOutputError(f"{path.name} line {n} {line!r}: field time_us (3rd) is not a number")
        out.append(int(fields[2]))
    return out


def p99_ms(samples_us: list[int]) -> float:
    """Nearest-rank p99 of the latencies, in ms."""
    if not samples_us:
        raise PgbenchOutputError("pgbench's transaction log is empty: no latency to take p99 of")
    s = sorted(samples_us)
    return s[min(len(s) - 1, int(0.99 * len(s)))] / 1000


def connection(host: str, port: str) -> list[str]:
    return ["-h", host, "-p", port, "-U", USER]


def wait_ready(host: str, port: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while subprocess.run(["pg_isready", "-q", "-t", "1", *connection(host, port)]).returncode != 0:
        if time.monotonic() > deadline:
            sys.exit(f"pgbench_json: {host}:{port} does not accept connections after {READY_TIMEOUT_S:g} s")
        time.sleep(0.1)


def ensure_tables(host: str, port: str) -> None:
    """pgbench -i once per cluster (the cluster keeps its tables across server restarts)."""
    query = "select to_regclass('public.pgbench_accounts') is not null"
    cmd = ["psql", "-Atc", query, *connection(host, port), DATABASE]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"pgbench_json: psql exited with {out.returncode}: {out.stderr.strip()}")
    if out.stdout.strip() == "t":
        return
    # -I dtGvp: drop, tables, generate server-side (1M rows need not cross the veth), vacuum, keys.
    init = ["pgbench", "-i", "-q", "-s", str(SCALE), "-I", "dtGvp", *connection(host, port), DATABASE]
    done = subprocess.run(init, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"pgbench_json: pgbench -i exited with {done.returncode}: {done.stderr.strip()[-500:]}")


def run(host: str, port: str, seconds: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="xtune-pgbench-") as logs:
        # -n: no vacuum before the run (select-only changes nothing); -P: progress at the run's end,
        # which is what makes pgbench print the latency stddev; -l: a line per transaction (p99).
        cmd = ["pgbench", "-n", "-S", "-c", str(CLIENTS), "-j", str(THREADS), "-T", seconds, "-P", seconds]
        cmd += ["-l", f"--log-prefix={logs}/tx", *connection(host, port), DATABASE]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            raise PgbenchOutputError(f"pgbench exited with {done.returncode}: {tail}")
        figures = parse_summary(done.stdout)
        samples = [us for f in sorted(Path(logs).iterdir()) for us in latencies_us(f)]
        figures["latency_p99_ms"] = p99_ms(samples)
    return figures


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        sys.exit("usage: pgbench_json.py HOST PORT SECONDS")
    host, port, seconds = argv[1:]
    wait_ready(host, port)
    ensure_tables(host, port)
    try:
        figures = run(host, port, seconds)
    except PgbenchOutputError as e:
        print(f"pgbench_json: {e}", file=sys.stderr)
        return 1
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The func family on real uprobes: latency quantiles of known sleeps, and --pid / --comm filters."""

import math
import os
import subprocess

import pytest
from xtune.signals.frames import ShmFrameReader
from xtune.testing.observe import frames_while

BOUND = 1 / 32  # the histogram's quantile error (observers/README.md)
PROBE_SLACK_NS = 200_000  # the caller's clock also covers the two probes and any preemption around them


def caller_quantile(durations: list[int], q: float) -> int:
    ordered = sorted(durations)
    return ordered[math.ceil(q * len(ordered)) - 1]


def test_latency_quantiles_of_known_sleeps(start_observer, uprobe_target):
    """Each call's entry-to-return time lies inside the caller's measurement of it, so the
    observed quantile is at most the caller's (plus the histogram's error), and at least the
    caller's minus the probes' cost and scheduling noise (minus the histogram's error)."""
    n = 100
    obs = start_observer("--families", "func", "--func", f"{uprobe_target}:xt_sleep", "--window-ms", "3000")
    out: list[str] = []
    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(
            reader,
            lambda: out.append(
                subprocess.run(
                    [str(uprobe_target), "sleeps", str(n)], check=True, capture_output=True, text=True
                ).stdout
            ),
            settle=3.5,
        )
    durations = [int(line) for line in out[0].split()[:-2]]  # the last line is "done N"
    assert len(durations) == n
    busy = [f for f in frames if f.values["func.xt_sleep.calls"]]
    assert [f.values["func.xt_sleep.calls"] for f in busy] == [n], "all calls in one 3 s window"
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        want_ns = caller_quantile(durations, q)
        got_ns = busy[0].values[f"func.xt_sleep.latency.{name}"] * 1e3
        assert got_ns <= want_ns * (1 + BOUND), f"{name}: {got_ns} ns above the caller's {want_ns} ns"
        assert got_ns >= (want_ns - PROBE_SLACK_NS) * (1 - BOUND), f"{name}: {got_ns} ns, caller {want_ns} ns"


def run_gated(targets: list[tuple[str, int]]) -> None:
    procs = [
        subprocess.Popen([path, "gated", str(n)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        for path, n in targets
    ]
    for p in procs:
        p.communicate("go\n", timeout=60)
        assert p.returncode == 0


def test_pid_counts_only_that_process(start_observer, uprobe_target):
    """Two processes call the same function; --pid counts exactly the one given."""
    mine, other = 1000, 3000
    a = subprocess.Popen([str(uprobe_target), "gated", str(mine)], stdin=subprocess.PIPE, text=True)
    b = subprocess.Popen([str(uprobe_target), "gated", str(other)], stdin=subprocess.PIPE, text=True)
    try:
        obs = start_observer(
            "--families",
            "func",
            "--func",
            f"{uprobe_target}:xt_work",
            "--pid",
            str(a.pid),
            "--window-ms",
            "20",
        )

        def work() -> None:
            for p in (a, b):
                p.communicate("go\n", timeout=60)
                assert p.returncode == 0

        with ShmFrameReader(obs.shm) as reader:
            frames = frames_while(reader, work)
    finally:
        for p in (a, b):
            p.kill()
            p.wait()
    assert sum(f.values["func.xt_work.calls"] for f in frames) == mine


def test_comm_counts_only_that_command(start_observer, uprobe_target, tmp_path):
    """A hard link runs the same binary (same uprobe) under another command name."""
    other = tmp_path / "xt_other_name"
    os.link(uprobe_target, other)
    obs = start_observer(
        "--families",
        "func",
        "--func",
        f"{uprobe_target}:xt_work",
        "--comm",
        uprobe_target.name[:15],
        "--window-ms",
        "20",
    )
    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(reader, lambda: run_gated([(str(uprobe_target), 700), (str(other), 2000)]))
    assert sum(f.values["func.xt_work.calls"] for f in frames) == 700


def test_argument_gauges_mean_and_max(start_observer, uprobe_target):
    """xt_round(int flows, long backlog): per window mean and max, summed over windows, equal the
    values passed (negative ints included: /32 sign-extends the register's lower half)."""
    n = 5000
    flows = [i % 97 - 20 for i in range(n)]
    backlog = [i * 100000007 for i in range(n)]
    spec = f"{uprobe_target}:xt_round:arg0/32=flows:arg1=backlog"
    obs = start_observer("--families", "func", "--func", spec, "--window-ms", "20")
    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(
            reader, lambda: subprocess.run([str(uprobe_target), "rounds", str(n)], check=True)
        )
    busy = [f for f in frames if f.values["func.xt_round.calls"]]
    assert sum(f.values["func.xt_round.calls"] for f in busy) == n
    for name, values in (("flows", flows), ("backlog", backlog)):
        mean_sum = sum(f.values[f"func.xt_round.{name}.mean"] * f.values["func.xt_round.calls"] for f in busy)
        assert mean_sum == pytest.approx(sum(values), rel=1e-9, abs=1e-6)
        assert max(f.values[f"func.xt_round.{name}.max"] for f in busy) == max(values)
    idle = [f for f in frames if not f.values["func.xt_round.calls"]]
    assert all({"func.xt_round.flows.mean", "func.xt_round.flows.max"} <= f.empty for f in idle)


@pytest.mark.parametrize(
    "suffix, reason",
    [
        (":arg7=x", "arg0..arg4"),
        (":arg1=a-b", "NAME must be"),
        (":arg1/16=x", "argN/32=NAME"),
        (":arg0=x:arg1=x", "given twice"),
        ("", "BINARY"),
    ],
)
def test_bad_argument_gauges_are_refused(xobserve, uprobe_target, suffix, reason):
    target = f"{uprobe_target}:xt_round{suffix}" if suffix else "xt_round"
    out = subprocess.run([str(xobserve), "--func", target, "--once"], capture_output=True, text=True)
    assert out.returncode == 2
    assert reason in out.stderr

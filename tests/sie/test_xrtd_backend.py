"""xrtd's sie-user backend: a knob in xrtd's table drives the perf-const of a running process;
values outside xrtd's bounds or the plan's range (the analysis's) are refused by xrtd before the
journal and never reach the process; the allow-list names the executables; stopping xrtd restores
the text byte-exact, and so does killing it (the engine disarms when its control stream closes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import targets
from xtune.knobs.table import KnobError  # noqa: E402
from xtune.sie import attach as eng
from xtune.sie import scope as sc
from xtune.testing import sie_oracle as oracle
from xtune.testing.xrtd import Xrtd


def _plan(tmp_path: Path) -> tuple[object, Path]:
    table = targets.analyzed("mt_target", [100, 50, 300])
    scope = tmp_path / "scope.json"
    scope.write_text(table.to_json())
    plan = tmp_path / "K.plan"
    xtune = Path(sys.executable).parent / "xtune"
    subprocess.run(
        [str(xtune), "sie", "plan", "--scope", str(scope), "--const", "K", "-o", str(plan)], check=True
    )
    return table, plan


def test_xrtd_sie_user_knob(tmp_path, bin_dir):
    table, plan = _plan(tmp_path)
    const = table.consts[0]
    lo, hi = const.min_value, const.max_value
    assert lo is not None and hi is not None and lo > 1, "the test needs a validated range"
    t = oracle.Target(Path(table.binary.path))
    x = Xrtd(tmp_path).start()
    try:
        t.ask([1])
        c = x.client()
        with pytest.raises(KnobError, match="no such process"):
            c.register("K_gone", "sie-user", f"{2**22 + 17}:{plan}", min=1, max=5000)
        knob = c.register("K", "sie-user", f"{t.p.pid}:{plan}", min=1, max=5000)
        assert knob["original"] == 100 and knob["applied"] == 100
        assert eng.spans_hold_original(t.p.pid, table), "registration must not change the process"
        with pytest.raises(KnobError, match=f"knob K: refused: K = {lo - 1} is below the range the analysis"):
            c.set("K", lo - 1)  # in xrtd's bounds, outside the plan's: refused by xrtd itself
        assert eng.spans_hold_original(t.p.pid, table), "a refused value must not arm the process"
        assert not [line for line in x.journal() if '"op":"set"' in line], "refused before the journal"
        assert f"100 -> {lo - 1} refused" in x.audit()
        for k in (lo, hi, lo + 1, 250):
            c.set("K", k)
            assert t.ask([3000]) == [oracle.worker_answer(3000, k)]
        with pytest.raises(KnobError):
            c.set("K", 99999)  # out of xrtd's bounds: never reaches the process
        with pytest.raises(KnobError, match="above the range the analysis holds for"):
            c.set("K", hi + 1)
        assert t.ask([3000]) == [oracle.worker_answer(3000, 250)]
        assert not eng.spans_hold_original(t.p.pid, table)
        assert x.stop() == 0
        assert eng.spans_hold_original(t.p.pid, table), "xrtd's exit must restore the text byte-exact"
        assert t.ask([3000]) == [oracle.worker_answer(3000, 100)]
    finally:
        x.cleanup()
        t.close()


def test_xrtd_killed_target_runs_original(tmp_path, bin_dir):
    """kill -9 of xrtd while a value is set: the engine disarms, the process computes with V0."""
    table, plan = _plan(tmp_path)
    t = oracle.Target(Path(table.binary.path))
    x = Xrtd(tmp_path).start()
    try:
        t.ask([1])
        x.client().register("K", "sie-user", f"{t.p.pid}:{plan}", min=1, max=5000)
        x.client().set("K", 250)
        assert t.ask([3000]) == [oracle.worker_answer(3000, 250)]
        x.kill9()
        deadline = time.monotonic() + 30
        while not eng.spans_hold_original(t.p.pid, table) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert eng.spans_hold_original(t.p.pid, table), "the engine must disarm when xrtd dies"
        assert t.ask([3000]) == [oracle.worker_answer(3000, 100)]
        assert t.p.poll() is None
    finally:
        x.cleanup()
        t.close()


def _tracer(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    return 0


def _armed_then_both_killed(tmp_path: Path) -> tuple[object, oracle.Target, Xrtd]:
    """K = 250 through xrtd, then kill -9 of the engine and of xrtd: nothing disarmed, the process
    runs V' on patched code."""
    table, plan = _plan(tmp_path)
    t = oracle.Target(Path(table.binary.path))
    x = Xrtd(tmp_path).start()
    t.ask([1])
    x.client().register("K", "sie-user", f"{t.p.pid}:{plan}", min=1, max=5000)
    x.client().set("K", 250)
    engine = _tracer(t.p.pid)
    assert engine > 0, "the engine stays attached as the tracer"
    os.kill(engine, signal.SIGKILL)
    x.kill9()
    deadline = time.monotonic() + 10
    while _tracer(t.p.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert t.ask([3000]) == [oracle.worker_answer(3000, 250)], "the harm: V' left running"
    assert not eng.spans_hold_original(t.p.pid, table)
    return table, t, x


def test_xrtd_and_engine_killed_restart_puts_v0_back(tmp_path, bin_dir):
    """The restarted xrtd must not report V0 over V': its journal replay disarms what the dead
    engine left (the process computes with V0 again), and the knob comes back."""
    table, t, x = _armed_then_both_killed(tmp_path)
    try:
        x.start()
        assert eng.spans_hold_original(t.p.pid, table), "replay must disarm what the dead engine left"
        assert t.ask([3000]) == [oracle.worker_answer(3000, 100)]
        assert x.client().get("K")["applied"] == 100
        assert "registration-restored" in x.audit()
        assert not list((x.state_dir / "sie-user").glob(f"{t.p.pid}.*.state")), "leftover state removed"
        x.client().set("K", 300)  # and the knob works again
        assert t.ask([3000]) == [oracle.worker_answer(3000, 300)]
        assert x.stop() == 0
        assert eng.spans_hold_original(t.p.pid, table)
    finally:
        x.cleanup()
        t.close()


def test_xrtd_and_engine_killed_undo_fails_refused(tmp_path, bin_dir):
    """When what the dead engine left cannot be disarmed (here its plan copy is damaged), the knob
    is not registered again at V0: dropped, with an audit line that says what to do."""
    table, t, x = _armed_then_both_killed(tmp_path)
    try:
        (leftover,) = (x.state_dir / "sie-user").glob(f"{t.p.pid}.*.plan")
        leftover.write_text("not a plan\n")
        x.start()
        with pytest.raises(KnobError):
            x.client().get("K")
        audit = x.audit()
        assert "registration-dropped" in audit and "xsie-user disarm --plan" in audit, audit
        assert t.ask([3000]) == [oracle.worker_answer(3000, 250)], "nothing was changed"
    finally:
        x.cleanup()
        t.close()


def test_xrtd_leftover_of_a_reused_pid_removed(tmp_path, bin_dir):
    """Files a dead engine left for a pid that names another process now (another start time) are
    removed without touching the process, whose knob registers and works as usual."""
    table, plan = _plan(tmp_path)
    t = oracle.Target(Path(table.binary.path))
    x = Xrtd(tmp_path)
    left = x.state_dir / "sie-user"
    left.mkdir(parents=True)
    (left / f"{t.p.pid}.7.plan").write_text(plan.read_text())
    state = f"pid {t.p.pid} bias 0 tramp 10000 1000 knobs 0 0 server 0 start 1\n"
    (left / f"{t.p.pid}.7.state").write_text(state)
    x.start()
    try:
        t.ask([1])
        knob = x.client().register("K", "sie-user", f"{t.p.pid}:{plan}", min=1, max=5000)
        assert knob["applied"] == 100
        assert not list(left.glob(f"{t.p.pid}.7.*")), "the other process's leftovers are removed"
        assert eng.spans_hold_original(t.p.pid, table)
        x.client().set("K", 250)
        assert t.ask([3000]) == [oracle.worker_answer(3000, 250)]
    finally:
        x.cleanup()
        t.close()


def test_xrtd_sie_user_allow_list_and_targets(tmp_path, bin_dir):
    """--allow sie-user:GLOB names the executables xrtd may retune; a plan of several perf-consts
    needs the knob's one named (<pid>:<plan>#<CONST>), once."""
    table, plan = _plan(tmp_path)
    two = targets.analyzed("two_consts", [100, 50, 300], flags="-O2")
    l_table = targets.analyzed("two_consts", [7, 9, 40], flags="-O2", const="L")
    both = tmp_path / "both.plan"
    both.write_text(eng.plan_text(sc.merge([two, l_table]), ["K", "L"], "/dev/shm/unused"))
    t = oracle.Target(Path(table.binary.path))
    u = oracle.Target(Path(two.binary.path))
    exe, other = Path(table.binary.path).resolve(), Path(two.binary.path).resolve()  # as /proc/PID/exe
    assert exe.parent != other.parent
    x = Xrtd(tmp_path, "--allow", f"sie-user:{other.parent}/*").start()
    try:
        t.ask([1])
        c = x.client()
        with pytest.raises(KnobError, match=f"{exe} is not on xrtd's allow-list"):
            c.register("K", "sie-user", f"{t.p.pid}:{plan}", min=1, max=5000)
        with pytest.raises(KnobError, match="the plan holds 2 perf-consts: name one"):
            c.register("KL", "sie-user", f"{u.p.pid}:{both}", min=1, max=5000)
        with pytest.raises(KnobError, match="the plan has no perf-const M"):
            c.register("M", "sie-user", f"{u.p.pid}:{both}#M", min=1, max=5000)
        c.register("K", "sie-user", f"{u.p.pid}:{both}#K", min=1, max=5000)
        with pytest.raises(KnobError, match="K is already a knob"):
            c.register("K2", "sie-user", f"{u.p.pid}:{both}#K", min=1, max=5000)
        c.register("L", "sie-user", f"{u.p.pid}:{both}#L", min=1, max=5000)
        c.set("K", 20)
        c.set("L", 100)
        assert u.ask([500]) == ["480 800"]
        c.unregister("K")  # L still changed: K goes back to 100, the spans stay armed
        assert u.ask([500]) == ["400 800"]
        c.unregister("L")  # the last changed one disarms
        assert u.ask([500]) == ["400 521"]
        assert eng.spans_hold_original(u.p.pid, two)
    finally:
        x.cleanup()
        t.close()
        u.close()

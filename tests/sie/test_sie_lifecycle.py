"""The engine's checks where values are applied and the process's life under it: values outside
the plan's range refused by the engine itself, another build refused by its build id, a knob table
behind a symbolic link refused, fork children running the original code, exec ending the
attachment, a reused pid refused at disarm, the text byte-exact after."""

from __future__ import annotations

import os
import struct
import subprocess
import time
from pathlib import Path

import pytest
import targets
from xtune.knobs import table as table_layout
from xtune.sie import attach as eng
from xtune.testing import sie_oracle as oracle


def fork_target():
    table = targets.analyzed("fork_target", [100, 50, 300], flags="-O2")
    assert table.consts[0].tunable, table.consts[0].refusals
    return table


def test_engine_refuses_values_outside_the_plan(engine):
    table = fork_target()
    const = table.consts[0]
    assert const.min_value is not None and const.max_value is not None
    t = oracle.LineTarget(table.binary.path)
    try:
        assert t.ask("3000") == oracle.worker_answer(3000, 100)
        eng.attach(t.p.pid, table, ["K"])
        eng.set_value(t.p.pid, "K", const.max_value)  # no PerfConst: only the engine checks
        for bad, why in ((const.min_value - 1, "below"), (const.max_value + 1, "above")):
            with pytest.raises(eng.SieError, match=f"refused: K = {bad} is {why} the range"):
                eng.set_value(t.p.pid, "K", bad)
        assert t.ask("3000") == oracle.worker_answer(3000, const.max_value), (
            "a refusal leaves the value as is"
        )
        eng.detach(t.p.pid)
        assert eng.spans_hold_original(t.p.pid, table)
    finally:
        t.close()


def test_engine_refuses_another_build(engine, tmp_path):
    table = fork_target()
    assert table.binary.build_id, "gcc on Debian writes a build id"
    t = oracle.LineTarget(table.binary.path)
    try:
        t.ask("1")
        good = eng.plan_text(table, ["K"], "/dev/shm/unused")
        bad = good.replace(table.binary.build_id, "0" * len(table.binary.build_id))
        assert bad != good
        plan = tmp_path / "plan"
        plan.write_text(bad)
        r = subprocess.run(
            [str(engine), "arm", "--pid", str(t.p.pid), "--plan", str(plan), "--state", str(tmp_path / "st")],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 1 and "build id" in r.stderr and "another build" in r.stderr, r.stderr
        assert eng.spans_hold_original(t.p.pid, table)
        assert t.ask("3000") == oracle.worker_answer(3000, 100)
    finally:
        t.close()


@pytest.mark.parametrize("int3", [False, True], ids=["jump", "int3"])
def test_fork_child_runs_original_code(engine, int3):
    """A forking server: each child gets the original bytes back (with the int3 fallback a child
    left with a breakpoint and no tracer would die of SIGTRAP)."""
    table = fork_target()
    t = oracle.LineTarget(table.binary.path)
    try:
        t.ask("1")
        eng.attach(t.p.pid, table, ["K"], force_int3=int3)
        eng.set_value(t.p.pid, "K", 250)
        for _ in range(20):
            assert t.ask("f 3000") == oracle.worker_answer(3000, 100), "a fork child runs unpatched"
            assert t.line() == "forked"
            assert t.ask("3000") == oracle.worker_answer(3000, 250), "the parent keeps its value"
        eng.detach(t.p.pid)
        assert eng.spans_hold_original(t.p.pid, table)
        assert t.ask("3000") == oracle.worker_answer(3000, 100)
    finally:
        t.close()


@pytest.mark.parametrize("thread", ["main", "worker"])
def test_exec_ends_the_attachment(engine, thread):
    """exec ends the attachment and is reported as such, from the main thread (`fork_target`) or
    from a worker (`exec_held`: the kernel ends every other thread, the main one included, and
    gives the exec'ing thread the process's id)."""
    table = fork_target() if thread == "main" else targets.analyzed("exec_held", [100, 50, 300])
    t = oracle.LineTarget(table.binary.path)
    try:
        t.ask("1")
        att = eng.attach(t.p.pid, table, ["K"])
        eng.set_value(t.p.pid, "K", 250)
        assert t.ask("3000") == oracle.worker_answer(3000, 250)
        if thread == "main":
            assert t.p.stdin
            t.p.stdin.write("x\n")
            t.p.stdin.flush()
        else:
            assert t.ask("hold") == "held"
        deadline = time.monotonic() + 10
        while _exe(t.p.pid) != Path("/bin/cat").resolve():
            assert time.monotonic() < deadline, "exec did not happen"
            time.sleep(0.01)
        assert t.ask("hello") == "hello", "the new program runs, untraced"
        with pytest.raises(eng.SieError, match="called exec"):
            eng.detach(t.p.pid)
        assert not Path(f"/proc/{att.server}").exists() or eng._servers == {}
        assert not (att.dir / "meta.json").exists(), "the attachment is gone with the engine"
    finally:
        t.close()


def test_exec_while_a_change_waits(engine):
    """A worker inside K's span group calls exec while a change waits for quiescence (K is read in
    two functions, `targets/exec_held.c`): the change is refused as an exec, not as an exit, and the
    new program runs untraced."""
    table = targets.analyzed("exec_held", [100, 50, 300])
    assert len(table.const("K").spans) > 1, "a change of K waits for quiescence"
    t = oracle.LineTarget(table.binary.path)
    try:
        assert t.ask("500") == "400"
        eng.attach(t.p.pid, table, ["K"], timeout_ms=20000)
        assert t.ask("hold") == "held"
        with pytest.raises(eng.SieError, match=f"pid {t.p.pid} called exec"):
            eng.set_value(t.p.pid, "K", 50)
        assert t.ask("hello") == "hello", "the new program runs, untraced"
        with pytest.raises(eng.SieError, match="called exec"):
            eng.detach(t.p.pid)
    finally:
        t.close()


def _exe(pid: int) -> Path | None:
    """The program `pid` runs; None while an exec is switching it."""
    try:
        return Path(f"/proc/{pid}/exe").resolve(strict=True)
    except OSError:
        return None


def knob_table(path: Path) -> Path:
    """A knob table whose slot 0 holds K's original (100): `arm` alone reads `applied` there."""
    image = bytearray(table_layout.KNOB_TABLE_SIZE)
    off = table_layout.HEADER_SIZE + table_layout.OFF_APPLIED
    image[off : off + 8] = struct.pack("<q", 100)
    path.write_bytes(bytes(image))
    return path


def test_knob_table_behind_a_symbolic_link_refused(engine, tmp_path):
    """The engine opens the knob table inside the target with O_NOFOLLOW: a link in its place is
    refused with the reason, nothing mapped or patched; the table's own path arms."""
    table = targets.analyzed("mt_target", [100, 50, 300])
    knobs = knob_table(tmp_path / "knobs")
    link = tmp_path / "knobs.link"
    link.symlink_to(knobs)
    plan, state = tmp_path / "K.plan", tmp_path / "K.state"
    files = ["--plan", str(plan), "--state", str(state)]
    t = oracle.Target(Path(table.binary.path))
    try:
        t.ask([1])
        maps = Path(f"/proc/{t.p.pid}/maps").read_text()
        plan.write_text(eng.plan_text(table, ["K"], str(link)))
        arm = [str(engine), "arm", "--pid", str(t.p.pid), *files]
        r = subprocess.run(arm, capture_output=True, text=True)
        assert r.returncode == 1 and f"knob table {link} is a symbolic link" in r.stderr, r.stderr
        assert eng.spans_hold_original(t.p.pid, table)
        assert Path(f"/proc/{t.p.pid}/maps").read_text() == maps, "nothing left mapped"
        plan.write_text(eng.plan_text(table, ["K"], str(knobs)))
        subprocess.run(arm, check=True, capture_output=True)
        assert not eng.spans_hold_original(t.p.pid, table)
        subprocess.run([str(engine), "disarm", *files], check=True, capture_output=True)
        assert eng.spans_hold_original(t.p.pid, table)
        assert t.ask([3000]) == [oracle.worker_answer(3000, 100)] and t.p.poll() is None
    finally:
        t.close()


def test_disarm_refuses_a_reused_pid(engine, tmp_path):
    """The state records the armed process's start time: when the pid names another process, disarm
    refuses and writes nothing into it (here the start time in the state is made another one)."""
    table = targets.analyzed("mt_target", [100, 50, 300])
    knobs = knob_table(tmp_path / "knobs")
    plan, state = tmp_path / "K.plan", tmp_path / "K.state"
    plan.write_text(eng.plan_text(table, ["K"], str(knobs)))
    files = ["--plan", str(plan), "--state", str(state)]
    t = oracle.Target(Path(table.binary.path))
    try:
        t.ask([1])
        subprocess.run([str(engine), "arm", "--pid", str(t.p.pid), *files], check=True, capture_output=True)
        assert not eng.spans_hold_original(t.p.pid, table)
        armed = state.read_text()
        start = int(armed.split(" start ")[1])
        state.write_text(armed.replace(f" start {start}", f" start {start + 1}"))
        r = subprocess.run([str(engine), "disarm", *files], capture_output=True, text=True)
        assert r.returncode == 1 and f"pid {t.p.pid} is another process now" in r.stderr, r.stderr
        assert not eng.spans_hold_original(t.p.pid, table), "nothing written into the other process"
        state.write_text(armed)
        subprocess.run([str(engine), "disarm", *files], check=True, capture_output=True)
        assert eng.spans_hold_original(t.p.pid, table)
        assert t.ask([3000]) == [oracle.worker_answer(3000, 100)] and t.p.poll() is None
    finally:
        t.close()


def test_disarm_reads_only_its_own_state_file(engine, tmp_path):
    """disarm writes bytes into the process a state file names: a symbolic link to it, a FIFO in
    its place, a file of another user or one others may write are refused with the reason and
    nothing is written; the file the engine wrote disarms."""
    table = targets.analyzed("mt_target", [100, 50, 300])
    knobs = knob_table(tmp_path / "knobs")
    plan, state = tmp_path / "K.plan", tmp_path / "K.state"
    plan.write_text(eng.plan_text(table, ["K"], str(knobs)))
    t = oracle.Target(Path(table.binary.path))
    try:
        t.ask([1])
        arm = [str(engine), "arm", "--pid", str(t.p.pid), "--plan", str(plan), "--state", str(state)]
        subprocess.run(arm, check=True, capture_output=True)

        def refused(path: Path, why: str) -> None:
            r = subprocess.run(
                [str(engine), "disarm", "--plan", str(plan), "--state", str(path)],
                capture_output=True,
                text=True,
            )
            assert r.returncode == 1 and f"refused: state {path} {why}" in r.stderr, r.stderr
            assert not eng.spans_hold_original(t.p.pid, table), "nothing written into the process"

        link, fifo, copy = tmp_path / "link.state", tmp_path / "fifo.state", tmp_path / "copy.state"
        link.symlink_to(state)
        refused(link, "is a symbolic link")
        os.mkfifo(fifo, 0o600)
        refused(fifo, "is not a regular file")
        copy.write_bytes(state.read_bytes())
        copy.chmod(0o600)
        os.chown(copy, 65534, 65534)
        refused(copy, "is owned by uid 65534, neither root nor")
        os.chown(copy, 0, 0)
        copy.chmod(0o622)
        refused(copy, "may be written by others (mode 622")
        subprocess.run([str(engine), "disarm", "--plan", str(plan), "--state", str(state)], check=True)
        assert eng.spans_hold_original(t.p.pid, table)
        assert t.ask([3000]) == [oracle.worker_answer(3000, 100)] and t.p.poll() is None
    finally:
        t.close()


def test_disarm_waits_for_a_signal_handler_that_interrupted_a_trampoline(engine):
    """A thread interrupted inside a trampoline runs its signal handler with the trampoline's
    address saved on its stack: disarm must count it as inside (the stack scan covers the
    trampolines) and unmap only once it returned, else the return from the handler faults."""
    table = targets.analyzed("signal_target", [100, 50, 300])
    t = oracle.Target(Path(table.binary.path))
    try:
        assert t.ask([3000]) == [oracle.worker_answer(3000, 100)]
        eng.attach(t.p.pid, table, ["K"])
        eng.set_value(t.p.pid, "K", 250)
        assert t.p.stdout is not None
        assert t.p.stdout.readline().strip() == "hit"  # the handler now stays 300 ms
        eng.detach(t.p.pid)
        assert eng.spans_hold_original(t.p.pid, table)
        time.sleep(0.5)
        assert t.ask([3000]) == [oracle.worker_answer(3000, 100)]
        assert t.p.poll() is None, f"the target died: {t.p.returncode}"
    finally:
        t.close()


def _live_task(pid: int) -> int:
    """A thread of `pid` other than its exited main thread: its /proc entries show the process."""
    return min(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)


@pytest.mark.parametrize("int3", [False, True], ids=["jump", "int3"])
def test_main_thread_exit_while_armed(engine, int3):
    """The main thread ends with pthread_exit while workers run through the span: the engine goes
    on changing values (a zombie main thread runs no code) and disarms; attaching afterwards is
    refused with that reason (not with a missing /proc/PID/exe), since /proc/PID then shows no
    executable or memory."""
    table = targets.analyzed("leader_exit", [100, 50, 300])
    t = oracle.LineTarget(table.binary.path)
    try:
        assert t.ask("3000") == oracle.worker_answer(3000, 100)
        eng.attach(t.p.pid, table, ["K"], force_int3=int3)
        eng.set_value(t.p.pid, "K", 250)
        assert t.ask("3000") == oracle.worker_answer(3000, 250)
        assert t.ask("e") == "exited"
        for v in (60, 280, 100, 250):
            eng.set_value(t.p.pid, "K", v)
            assert t.ask("3000") == oracle.worker_answer(3000, v)
        eng.detach(t.p.pid)
        assert eng.spans_hold_original(_live_task(t.p.pid), table)
        assert t.ask("3000") == oracle.worker_answer(3000, 100)
        assert t.p.poll() is None, f"the target died: {t.p.returncode}"
        with pytest.raises(eng.SieError, match=f"refused: the main thread of pid {t.p.pid} has exited"):
            eng.attach(t.p.pid, table, ["K"], force_int3=int3)
        assert eng.spans_hold_original(_live_task(t.p.pid), table), "a refusal changes nothing"
    finally:
        t.close()


def test_disarm_from_the_state_file_after_main_thread_exit(engine):
    """xrtd's path after an engine died: `disarm` from the state file it left. The main thread has
    ended with pthread_exit while workers run on patched code: disarm attaches through a live thread
    and puts the original bytes back."""
    table = targets.analyzed("leader_exit", [100, 50, 300])
    t = oracle.LineTarget(table.binary.path)
    att = None
    try:
        assert t.ask("3000") == oracle.worker_answer(3000, 100)
        att = eng.attach(t.p.pid, table, ["K"])
        eng.set_value(t.p.pid, "K", 250)
        assert t.ask("e") == "exited"
        server = eng._servers.pop(att.server)
        server.kill()
        server.wait()
        assert t.ask("3000") == oracle.worker_answer(3000, 250), "the dead engine left its value"
        assert not eng.spans_hold_original(_live_task(t.p.pid), table)
        files = ["--plan", str(att.dir / "plan"), "--state", str(att.dir / "state")]
        r = subprocess.run([str(engine), "disarm", *files], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert eng.spans_hold_original(_live_task(t.p.pid), table)
        assert t.ask("3000") == oracle.worker_answer(3000, 100)
        assert t.p.poll() is None, f"the target died: {t.p.returncode}"
    finally:
        t.close()
        if att is not None:
            eng._cleanup(att)

"""Threads created while a change waits for quiescence (tests/sie/targets/clone_storm.c): a thread
inside K's span group creates workers while the engine holds the others for a change of a
perf-const read at several spans. Every thread, old and new, has the engine as its tracer while
the change waits (PTRACE_O_TRACECLONE: none runs untraced); the change then applies with every
worker's passes on the new value (a pass that mixed two aborts the target), or, when the spawner
stays inside past the engine's limit, is refused with the reason and the old value stays."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import targets
from xtune.sie import attach as eng
from xtune.testing import sie_oracle as oracle


def tracers(pid: int) -> dict[int, int]:
    """TracerPid of every thread of `pid` (those that end while read are skipped)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except OSError:
            continue
        out[int(tid)] = int(next(x for x in status.splitlines() if x.startswith("TracerPid:")).split()[1])
    return out


def change_while_spawning(t: oracle.LineTarget, att: eng.Attachment, value: int, spawn: int) -> str:
    """Start `spawn` workers from inside the span group, set K meanwhile; returns the engine's
    refusal ("" when applied) after checking that every thread had the engine as tracer and that
    threads were created while the change waited."""
    before = set(tracers(t.p.pid))
    assert t.ask(f"spawn {spawn}") == "spawning"
    refusal: list[str] = []

    def change() -> None:
        try:
            eng.set_value(t.p.pid, "K", value)
        except eng.SieError as e:
            refusal.append(str(e))

    th = threading.Thread(target=change)
    th.start()
    created: set[int] = set()
    while th.is_alive():
        now = tracers(t.p.pid)
        untraced = {tid: tr for tid, tr in now.items() if tr != att.server}
        assert not untraced, (
            f"threads not traced by the engine ({att.server}) while a change waits: {untraced}"
        )
        created |= set(now) - before
        time.sleep(0.02)
    th.join()
    assert created, "no thread was created while the change waited"
    return refusal[0] if refusal else ""


def test_threads_created_while_a_change_waits(engine):
    table = targets.analyzed("clone_storm", [64, 32, 128])
    const = table.consts[0]
    assert const.tunable and len(const.spans) >= 2, (const.refusals, const.spans)
    t = oracle.LineTarget(table.binary.path)
    try:
        assert t.ask("spawn 2") == "spawning"
        assert t.ask("q") == "64 64 2"
        workers = 2
        # The spawner needs 120 ms at least for 60 workers: a change that may wait 100 ms is refused.
        att = eng.attach(t.p.pid, table, ["K"], timeout_ms=100)
        refusal = change_while_spawning(t, att, 128, 60)
        workers += 60
        assert re.search(r"safe span of K for longer than 100 ms \(\d+ tries\); nothing was changed", refusal)
        assert t.ask("q") == f"64 64 {workers}", "a refused change leaves the value in effect"
        eng.set_value(t.p.pid, "K", 128)
        assert t.ask("q") == f"128 128 {workers}"
        eng.detach(t.p.pid)
        assert t.ask("q") == f"64 64 {workers}"
        att = eng.attach(t.p.pid, table, ["K"], timeout_ms=20000)
        for value in (32, 128, 32):
            assert change_while_spawning(t, att, value, 30) == ""
            workers += 30
            assert t.ask("q") == f"{value} {value} {workers}", "every worker, old and new, on the new value"
        eng.detach(t.p.pid)
        assert eng.spans_hold_original(t.p.pid, table)
        assert t.ask("q") == f"64 64 {workers}"
        assert t.p.poll() is None, "no worker aborted on a mixed pass"
    finally:
        t.close()

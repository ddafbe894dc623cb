"""SIE on a process that observers probe at the same time. A uprobe's breakpoints and a
uretprobe's return trampoline live in a kernel page ptrace cannot write, and a uretprobe hides
the real return address from the stack scan: arming, changing and disarming must still be exact,
and a thread that never returns from a uretprobed function makes arming refuse, not guess."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
import targets
from xtune.host.services import Services
from xtune.sie import attach as eng
from xtune.testing import sie_oracle as oracle


def uprobes_page(pid: int, wait_s: float = 10.0) -> bool:
    """Whether a probe fired in pid: the kernel maps [uprobes] at the first hit. The answering
    thread can reply before the main thread reaches worker(), so on a busy host this waits."""
    deadline = time.monotonic() + wait_s
    while "[uprobes]" not in Path(f"/proc/{pid}/maps").read_text():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_changes_and_cycles_under_uretprobes(engine):
    """4 workers call one_round() -> compute() without pause while xobserve times one_round()
    with a uprobe + uretprobe."""
    table = targets.analyzed("probed_target", [100, 50, 300])
    const = table.consts[0]
    assert const.tunable, const.refusals
    t = oracle.Target(Path(table.binary.path))
    rnd = random.Random(7)
    try:
        with Services(["func"], funcs=[f"{table.binary.path}:one_round"], window_ms=100):
            assert t.ask([3]) == [oracle.worker_answer(3, 100)]
            assert uprobes_page(t.p.pid), "the probes never fired in the target"
            oracle.arm_change_disarm(t, table, rnd, cycles=40, changes=5)
        assert t.ask([77]) == [oracle.worker_answer(77, 100)]
        assert t.p.poll() is None, "a worker saw an impossible result and aborted"
    finally:
        t.close()


def test_uretprobe_that_may_hide_a_safe_span_is_refused(engine):
    """A uretprobe on the workers' never-ending function. scaled() calls out from inside J's
    safe span, so the return address the kernel holds could be there: arming J is refused with
    that reason. compute()'s safe span has no call in it, so K is armed and exact all the same."""
    j = targets.analyzed("probed_target", [1000, 500, 3000], const="J")
    k = targets.analyzed("probed_target", [100, 50, 300])
    assert j.consts[0].tunable and k.consts[0].tunable
    assert j.consts[0].spans[0].return_points and not k.consts[0].spans[0].return_points
    with Services(["func"], funcs=[f"{j.binary.path}:worker"], window_ms=100):
        t = oracle.Target(Path(j.binary.path))
        try:
            assert t.ask([3]) == [oracle.worker_answer(3, 100)]
            assert uprobes_page(t.p.pid), "the probes never fired in the target"
            with pytest.raises(eng.SieError, match="uretprobe"):
                eng.attach(t.p.pid, j, ["J"], timeout_ms=300)
            assert eng.spans_hold_original(t.p.pid, j), "a refusal changes nothing"
            eng.attach(t.p.pid, k, ["K"], timeout_ms=5000)
            eng.set_value(t.p.pid, "K", 250, k.consts[0])
            assert t.ask([3000]) == [oracle.worker_answer(3000, 250)]
            eng.detach(t.p.pid, timeout_ms=5000)
            assert eng.spans_hold_original(t.p.pid, k)
            assert t.p.poll() is None
        finally:
            t.close()


def test_uprobe_on_the_span_is_refused_with_its_reason(engine):
    """A uprobe at compute()'s entry puts its int3 on K's span: arming says so, changes nothing."""
    table = targets.analyzed("probed_target", [100, 50, 300])
    with Services(["func"], funcs=[f"{table.binary.path}:compute"], window_ms=100):
        t = oracle.Target(Path(table.binary.path))
        try:
            assert t.ask([3]) == [oracle.worker_answer(3, 100)]
            with pytest.raises(eng.SieError, match=r"breakpoint \(int3\) at \+0.*uprobe or a debugger"):
                eng.attach(t.p.pid, table, ["K"], timeout_ms=1000)
            assert t.ask([3000]) == [oracle.worker_answer(3000, 100)]
        finally:
            t.close()

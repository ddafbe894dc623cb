"""Safe transitions at 1 kHz: a perf-const that is a loop bound and a ring mask at once
(tests/sie/targets/batch_ring.c) retuned through xrtd's sie-user backend with random in-range
values; every pass checks its own invariant and aborts on a mixed value. Two shapes: K read at
three spans of one pass (changed with the world stopped at quiescence) and K read once per pass
(one span: changed by one atomic store, the target never stopped, so no change may be refused).

XTUNE_STRESS_SECONDS sets the duration (default 30; 600 for the long run)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import targets
from xtune.knobs.table import KnobError
from xtune.sie import attach as eng
from xtune.sie.analyze import analyze
from xtune.sie.scope import ScopeTable
from xtune.sie.spec import spec_from_dict
from xtune.testing.xrtd import Xrtd

SECONDS = float(os.environ.get("XTUNE_STRESS_SECONDS", "30"))
PERIOD = 0.001  # one change per millisecond at most


def batch_ring(one_read: bool) -> ScopeTable:
    # The ring marks live in a stack array the analysis cannot tell from other memory: the
    # program copes with K changing between passes, which is what the spec's opt-in states.
    flag = "-DONE_READ " if one_read else ""
    spec = {
        "source": "batch_ring.c",
        "constant": "K",
        "values": [64, 32, 128],
        "build": f"gcc -O2 {flag}-pthread -o {{out}} {{src}}",
        "persistent": True,
    }
    table = analyze(spec_from_dict(spec, targets.TARGETS / "spec.toml"))
    const = table.consts[0]
    assert const.tunable, const.refusals
    if one_read:
        assert len(const.spans) == 1, "one read of K per pass must be one span"
    else:
        assert len(const.spans) >= 3, "the bound and the mask must be separate spans of one pass"
    return table


class Ring:
    def __init__(self, path: str) -> None:
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.p.stdout and self.p.stdout.readline().strip() == "ready"

    def last_k(self) -> int:
        assert self.p.stdin and self.p.stdout
        self.p.stdin.write("?\n")
        self.p.stdin.flush()
        return int(self.p.stdout.readline())

    def wait_k(self, k: int, timeout: float = 5) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.p.poll() is None:
            if self.last_k() == k:
                return True
            time.sleep(0.001)
        return False

    def close(self) -> None:
        self.p.kill()
        self.p.wait()


def plan_for(table: ScopeTable, tmp: Path) -> Path:
    plan = tmp / "K.plan"
    plan.write_text(eng.plan_text(table, ["K"], "/dev/shm/unused"))
    return plan


@pytest.mark.parametrize("one_read", [False, True], ids=["three_spans", "one_read"])
def test_bound_and_mask_retuned_at_1khz(tmp_path, bin_dir, one_read):
    table = batch_ring(one_read)
    const = table.consts[0]
    lo, hi = const.min_value, const.max_value
    assert lo is not None and hi is not None
    powers = [1 << b for b in range(64) if lo <= 1 << b <= hi]
    assert len(powers) >= 3
    t = Ring(table.binary.path)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # load on the shared cores
    x = Xrtd(tmp_path).start()
    rnd = random.Random(10)
    applied = refused = 0
    try:
        c = x.client()
        c.register("K", "sie-user", f"{t.p.pid}:{plan_for(table, tmp_path)}", min=1, max=1 << 20)
        with pytest.raises(KnobError, match="above the range the analysis holds for"):
            c.set("K", hi * 2)  # within xrtd's bounds, outside the analysis's: the engine refuses
        t0 = time.monotonic()
        next_at = t0
        while time.monotonic() - t0 < SECONDS:
            k = rnd.choice(powers)
            try:
                c.set("K", k)
                applied += 1
            except KnobError as e:
                assert "refused" in str(e), e  # only a reasoned refusal (no quiescence in time)
                refused += 1
            if applied % 500 == 1:
                assert t.wait_k(k), f"K = {k} applied, the target still runs {t.last_k()}"
            assert t.p.poll() is None, "a pass saw two values of K"
            next_at += PERIOD
            time.sleep(max(0.0, next_at - time.monotonic()))
        assert t.p.poll() is None, "a pass saw two values of K"
        assert applied >= SECONDS * 100, f"only {applied} changes applied ({refused} refused)"
        if one_read:
            assert refused == 0, f"{refused} changes of a once-read K refused: none needs quiescence"
        assert x.stop() == 0
        assert eng.spans_hold_original(t.p.pid, table), "the text must be byte-exact after disarm"
        assert t.wait_k(64), "after disarm the target runs its original K"
        assert t.p.poll() is None
        print(f"{applied} changes applied, {refused} refused in {SECONDS:.0f} s")
    finally:
        hog.kill()
        hog.wait()
        x.cleanup()
        t.close()


def test_a_once_read_change_is_stored_by_xrtd_without_waking_the_engine(tmp_path, bin_dir):
    """A once-read perf-const's change is one atomic store of its word, which xrtd makes itself in
    the value page the engine shares: with the engine stopped (SIGSTOP) the change still takes
    effect at once. Once the engine is gone, xrtd stores nothing and says so."""
    table = batch_ring(True)
    t = Ring(table.binary.path)
    x = Xrtd(tmp_path).start()
    try:
        c = x.client()
        c.register("K", "sie-user", f"{t.p.pid}:{plan_for(table, tmp_path)}", min=1, max=1 << 20)
        c.set("K", 32)  # arms: the engine starts and shares its value page
        assert t.wait_k(32)
        (engine,) = [
            int(pid)
            for pid in subprocess.run(
                ["pgrep", "-f", f"xsie-user run --pid {t.p.pid} "], capture_output=True, text=True
            ).stdout.split()
        ]
        os.kill(engine, signal.SIGSTOP)
        try:
            c.set("K", 128)  # the engine cannot answer: only xrtd's own store can apply this
            assert t.wait_k(128, timeout=2), f"K still {t.last_k()} with the engine stopped"
        finally:
            os.kill(engine, signal.SIGCONT)
        os.kill(engine, signal.SIGKILL)
        time.sleep(0.2)
        with pytest.raises(KnobError):
            c.set("K", 16)
        assert t.last_k() == 128, "nothing may be stored once the engine is gone"
    finally:
        x.cleanup()
        t.close()

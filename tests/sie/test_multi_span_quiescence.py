"""A perf-const read in two functions (tests/sie/targets/two_spans.c), retuned through xrtd's
sie-user backend: while a thread sits inside the safe span of the plan's last span, and none is in
the others', arming and every later change wait for it (each stop checks every span of the
perf-const), retry until the engine's limit and then refuse with the reason, changing nothing;
once the thread has left, the same change goes through."""

from __future__ import annotations

import pytest
import targets
from xtune.knobs.table import KnobError
from xtune.sie import attach as eng
from xtune.testing import sie_oracle as oracle
from xtune.testing.xrtd import Xrtd

BUSY = r"sie-user: refused: thread \d+ is at 0x[0-9a-f]+, inside a safe span of K for longer than"


def test_thread_in_a_later_span_delays_arming_and_changes(tmp_path, bin_dir):
    table = targets.analyzed("two_spans", [100, 50, 300])
    const = table.consts[0]
    assert {s.function for s in const.spans} == {"first", "second"}, const.spans
    # `first`'s spans first in the plan, the held one last: an engine that looked at the first
    # span only would find no thread inside and change K under the held pass.
    const.spans.sort(key=lambda s: s.function != "first")
    plan = tmp_path / "K.plan"
    plan.write_text(eng.plan_text(table, ["K"], "/dev/shm/unused"))
    t = oracle.LineTarget(table.binary.path)
    x = Xrtd(tmp_path).start()
    try:
        c = x.client()
        c.register("K", "sie-user", f"{t.p.pid}:{plan}", min=const.min_value, max=const.max_value)
        assert t.ask("500") == "400"
        assert t.ask("hold") == "held"
        with pytest.raises(KnobError, match=BUSY):
            c.set("K", 200)  # arming waits for the thread in `second`, then refuses
        assert eng.spans_hold_original(t.p.pid, table), "a refused arming leaves the text as it was"
        assert t.ask("release") == "released"
        c.set("K", 200)
        assert t.ask("500") == "300"
        assert t.ask("hold") == "held"
        with pytest.raises(KnobError, match=BUSY):
            c.set("K", 300)  # a later change waits for it too
        assert t.ask("500") == "300", "a refused change leaves the value in effect"
        assert c.get("K")["applied"] == 200
        assert t.ask("release") == "released"
        c.set("K", 300)
        assert t.ask("500") == "200"
        assert x.stop() == 0
        assert eng.spans_hold_original(t.p.pid, table)
        assert t.ask("500") == "400"
    finally:
        x.cleanup()
        t.close()

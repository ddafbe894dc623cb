"""The frame pump wakes for every frame on the tick -> effect path: its thread runs with a short
scheduler slice and a 1 us timer slack, or SCHED_FIFO when asked, and keeps a real-time policy its
caller chose."""

from __future__ import annotations

import os
import threading
import time

from xtune.host.sched import prompt_wakeups
from xtune.testing.sched import sched_fields
from xtune.tuning.loop import FramePump
from xtune.tuning.metrics import Metrics


class IdleReader:
    """A frame source that never has a frame."""

    def poll(self, timeout: float | None = None) -> None:
        time.sleep(0.005)


def test_pump_thread_gets_a_short_slice():
    pump = FramePump(IdleReader(), 1_000_000, Metrics("pump-sched"))  # type: ignore[arg-type]
    pump.start()
    try:
        deadline = time.monotonic() + 5
        while pump.native_id is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # the thread sets its scheduling first thing
        threads = sched_fields(os.getpid())
        assert pump.sched_note is None
        assert threads[pump.native_id] == {"policy": 0, "se.slice": 100_000}
        with open(f"/proc/{pump.native_id}/timerslack_ns") as f:  # a thread id works there too
            assert int(f.read()) == 1000
        assert threads[os.getpid()]["se.slice"] != 100_000, "the caller's thread keeps its slice"
    finally:
        pump.stop()
    assert pump.error is None


def test_pump_thread_fifo_on_request():
    pump = FramePump(IdleReader(), 1_000_000, Metrics("pump-fifo"), rt_priority=1)  # type: ignore[arg-type]
    pump.start()
    try:
        deadline = time.monotonic() + 5
        while pump.native_id is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        assert pump.sched_note is None
        assert os.sched_getscheduler(pump.native_id) == os.SCHED_FIFO
        assert os.sched_getscheduler(0) == os.SCHED_OTHER, "only the pump thread"
    finally:
        pump.stop()


def test_real_time_policy_is_kept():
    """A SCHED_FIFO thread keeps its policy (a slice applies under SCHED_OTHER only)."""
    seen: dict[str, object] = {}

    def body() -> None:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        seen["note"] = prompt_wakeups()
        seen["policy"] = os.sched_getscheduler(0)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == {"note": None, "policy": os.SCHED_FIFO}

"""Prompt wake-ups for a thread on the tick → effect path (the frame pump).

The same as include/xtune/sched_slice.h does for the C daemons: under EEVDF a waking thread with
the default slice does not preempt a CPU-bound task whose deadline is earlier, so on a busy host
each wake-up may wait for the running task's slice to end (milliseconds). A custom slice
(sched_runtime under SCHED_OTHER, Linux >= 6.12, no privilege needed) makes the wake-up preempt,
and a 1 us timer slack keeps a timed sleep from ending up to 50 us late.
"""

from __future__ import annotations

import ctypes
import os
import platform

_SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}
_PR_SET_TIMERSLACK = 29
SLICE_MIN_US, SLICE_MAX_US = 100, 100_000  # what the kernel accepts


class _SchedAttr(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("policy", ctypes.c_uint32),
        ("flags", ctypes.c_uint64),
        ("nice", ctypes.c_int32),
        ("priority", ctypes.c_uint32),
        ("runtime", ctypes.c_uint64),
        ("deadline", ctypes.c_uint64),
        ("period", ctypes.c_uint64),
        ("util_min", ctypes.c_uint32),
        ("util_max", ctypes.c_uint32),
    ]


def prompt_wakeups(slice_us: int = SLICE_MIN_US, fifo_priority: int = 0) -> str | None:
    """Give the calling thread a short slice (or SCHED_FIFO at `fifo_priority` > 0, as the daemons'
    --rt-priority) and a 1 us timer slack; None, or why not (the thread then keeps the default
    scheduling, which is correct, only slower to wake on a busy host)."""
    if not SLICE_MIN_US <= slice_us <= SLICE_MAX_US:
        raise ValueError(f"slice_us {slice_us}: wants {SLICE_MIN_US}..{SLICE_MAX_US}")
    if not 0 <= fifo_priority <= 99:
        raise ValueError(f"fifo_priority {fifo_priority}: wants 0..99")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(1000), 0, 0, 0)
    if fifo_priority:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(fifo_priority))
        except OSError as e:
            return f"SCHED_FIFO {fifo_priority}: {e.strerror}"
        return None
    nr = _SYS_SCHED_SETATTR.get(platform.machine())
    if nr is None:
        return f"no sched_setattr number known for {platform.machine()}"
    if os.sched_getscheduler(0) != os.SCHED_OTHER:
        return None  # a real-time policy chosen by the caller is kept
    attr = _SchedAttr(size=ctypes.sizeof(_SchedAttr), policy=os.SCHED_OTHER, runtime=slice_us * 1000)
    if libc.syscall(nr, 0, ctypes.byref(attr), 0) != 0:
        return f"sched_setattr: {os.strerror(ctypes.get_errno())}"
    return None

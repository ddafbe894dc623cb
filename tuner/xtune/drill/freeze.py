"""Every thread of a process held still while probes are placed, through ptrace (seize and
interrupt), not SIGSTOP: the parent sees no stop, a shell no job control, and should this
process die while holding them, the kernel detaches and the threads run on.

Why: xobserve places a function's entry uprobe before its return uprobe. A call entered between
the two never reads as returned, and its thread then counts as inside the function for as long as
the probes stay (concurrency +1, no latency sample). At tens of thousands of calls a second that
is nearly certain; with no thread running while the probes go in, it cannot happen.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
from pathlib import Path
from types import TracebackType

from xtune.drill.image import DrillError

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000
PTRACE_EVENT_STOP = 128

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
_libc.ptrace.restype = ctypes.c_long


def _ptrace(request: int, tid: int, data: int = 0) -> int:
    """0, or the errno of the failed request."""
    if _libc.ptrace(request, tid, None, ctypes.c_void_p(data)) == -1:
        return ctypes.get_errno()
    return 0


class Frozen:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.held: dict[int, int] = {}  # thread id -> signal to hand back on detach

    def __enter__(self) -> Frozen:
        try:
            seen: set[int] = set()
            while new := self._threads() - seen:  # threads started meanwhile are held too
                for tid in sorted(new):
                    seen.add(tid)
                    self._hold(tid)
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._release()

    def _threads(self) -> set[int]:
        try:
            return {int(t) for t in os.listdir(f"/proc/{self.pid}/task")}
        except FileNotFoundError:
            raise DrillError(f"pid {self.pid} exited") from None

    def _hold(self, tid: int) -> None:
        err = _ptrace(PTRACE_SEIZE, tid)
        if err == errno.ESRCH:
            return  # the thread ended
        if err:
            why = "already traced (a debugger, strace?)" if err == errno.EPERM else os.strerror(err)
            raise DrillError(f"pid {self.pid}: cannot hold thread {tid} while probes go in: {why}")
        self.held[tid] = 0
        _ptrace(PTRACE_INTERRUPT, tid)
        _, status = os.waitpid(tid, WALL)
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            del self.held[tid]
        elif (
            os.WIFSTOPPED(status)
            and status >> 16 != PTRACE_EVENT_STOP
            and os.WSTOPSIG(status) != signal.SIGTRAP
        ):
            self.held[tid] = os.WSTOPSIG(status)  # a signal arrived first: delivered on detach

    def _release(self) -> None:
        for tid, sig in self.held.items():
            _ptrace(PTRACE_DETACH, tid, sig)
        self.held.clear()


def thread_count(pid: int) -> int:
    task = Path(f"/proc/{pid}/task")
    return len(list(task.iterdir())) if task.is_dir() else 0

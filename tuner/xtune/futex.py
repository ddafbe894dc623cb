"""futex(2) on shared memory: the doorbells of the frame ring and of the knob table.

A futex on a MAP_SHARED page is keyed by the file and the offset, not the address, so a waiter and
a waker in different processes (or different mappings of one process) meet on the same word.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _nr() -> int:
    nr = _SYS_FUTEX.get(platform.machine())
    if nr is None:
        raise OSError(f"futex: no system call number known for {platform.machine()}")
    return nr


def wake(addr: int, waiters: int = 1) -> None:
    """Wake up to `waiters` threads waiting on the 32-bit word at `addr`."""
    _libc.syscall(_nr(), ctypes.c_void_p(addr), _FUTEX_WAKE, waiters, None, None, 0)


def wait(addr: int, expected: int, timeout_ns: int) -> None:
    """Sleep while the 32-bit word at `addr` holds `expected`, at most `timeout_ns`; returns on a
    wake, a changed word, the timeout or a signal alike (the caller looks again)."""
    ts = _Timespec(timeout_ns // 1_000_000_000, timeout_ns % 1_000_000_000)
    # ctypes releases the GIL for the call, so other threads run while this one sleeps.
    _libc.syscall(
        _nr(), ctypes.c_void_p(addr), _FUTEX_WAIT, ctypes.c_uint32(expected), ctypes.byref(ts), None, 0
    )


class ReadOnlyPage:
    """The first page of a file mapped read-only at a fixed address, for waiting on a word of a
    shared mapping Python's mmap (which exposes no address for a read-only map) also holds."""

    def __init__(self, fd: int) -> None:
        addr = _libc.mmap(None, mmap.PAGESIZE, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap: {os.strerror(ctypes.get_errno())}")
        self.addr: int = addr

    def close(self) -> None:
        if self.addr:
            _libc.munmap(self.addr, mmap.PAGESIZE)
            self.addr = 0

"""Whether this host has a hardware PMU: tests and benchmark results read it instead of assuming."""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from pathlib import Path

# perf_event_open(2) syscall numbers; other architectures fall back to sysfs.
PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
PERF_TYPE_HARDWARE = 0
CYCLES = 0  # PERF_COUNT_HW_CPU_CYCLES
PERF_ATTR_SIZE = 128
# perf_event_attr flag bits: disabled, exclude_kernel, exclude_hv (counting user cycles needs no privilege).
PERF_FLAGS = (1 << 0) | (1 << 5) | (1 << 6)


def pmu_available() -> tuple[bool, str]:
    """Whether a hardware PMU counts CPU cycles here: opens a cycles event with perf_event_open."""
    nr = PERF_EVENT_OPEN.get(platform.machine())
    if nr is None:
        present = Path("/sys/bus/event_source/devices/cpu").exists()
        return present, "sysfs event_source/devices/cpu " + ("present" if present else "absent")
    # type, size, config, sample_period, sample_type, read_format, flags; the rest stays zero.
    attr = struct.pack("IIQQQQQ", PERF_TYPE_HARDWARE, PERF_ATTR_SIZE, CYCLES, 0, 0, 0, PERF_FLAGS)
    attr = attr.ljust(PERF_ATTR_SIZE, b"\0")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(nr, ctypes.c_char_p(attr), 0, -1, -1, 0)
    if fd < 0:
        err = ctypes.get_errno()
        return False, f"perf_event_open(cycles): {os.strerror(err)}"
    os.close(fd)
    return True, "perf_event_open(cycles) succeeded"

"""The block case's device: a loop device of its own over a file of random bytes on a real filesystem.

The device is made for the run (`/dev/loop-control`'s LOOP_CTL_ADD) and removed after it: an
existing loop device keeps the queue attributes its last user set (the kernel does not reset them
on detach), a new one starts at the kernel's defaults, which the defaults contender reads.
The file is written in full (a sparse or fallocated file reads back zeros without touching the
disk) and attached with `losetup --direct-io=on`, so the loop device's own queue and page cache are
the only ones in the path: reads of the backing file go to the disk, not to a second page cache.
A tmpfs or ramfs directory is refused (no disk under it). The device is detached and removed and
the file deleted on every way out of the `with` block; a SIGTERM (the usual way a run is stopped)
becomes SystemExit while it is held, so the same `finally` runs. Only SIGKILL can leave them behind.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from xtune.host.netns import Setup

SIZE_MIB = 512
MEMORY_FILESYSTEMS = {"tmpfs", "ramfs"}
LOOP_CONTROL = "/dev/loop-control"
LOOP_CTL_ADD, LOOP_CTL_REMOVE = 0x4C80, 0x4C81  # <linux/loop.h>
REMOVE_TRIES = 50  # LOOP_CTL_REMOVE is EBUSY until the detach's last reference is dropped


def filesystem_type(path: Path) -> str:
    out = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, check=True)
    return out.stdout.strip()


class LoopDevice(Setup):
    def __init__(self, directory: Path, size_mib: int = SIZE_MIB) -> None:
        self.file = directory / "block-case.img"
        self.size_mib = size_mib
        self.index: int | None = None  # N of the loopN this object made
        self.attached = False
        self._term: Any = None  # the SIGTERM handler to put back

    @property
    def name(self) -> str:
        return f"loop{self.index}"

    @property
    def queue(self) -> Path:
        return Path("/sys/block") / self.name / "queue"

    def _create(self) -> None:
        fs = filesystem_type(self.file.parent)
        if fs in MEMORY_FILESYSTEMS:
            raise RuntimeError(f"{self.file.parent} is on {fs}: the block case needs a filesystem on a disk")
        if threading.current_thread() is threading.main_thread():
            self._term = signal.signal(signal.SIGTERM, _exit_on_term)
        with open(self.file, "wb") as f:
            for _ in range(self.size_mib):
                f.write(os.urandom(1 << 20))
            f.flush()
            os.fsync(f.fileno())
        self.index = _loop_control(LOOP_CTL_ADD, -1)  # -1: the kernel picks a free number
        cmd = ["losetup", "--direct-io=on", f"/dev/{self.name}", str(self.file)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()}")
        self.attached = True

    def close(self) -> None:
        try:
            if self.attached:
                cmd = ["losetup", "--detach", f"/dev/{self.name}"]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()}")
                self.attached = False
            if self.index is not None:
                _remove(self.index)
                self.index = None
            self.file.unlink(missing_ok=True)
        finally:
            if self._term is not None:
                signal.signal(signal.SIGTERM, self._term)
                self._term = None


def _loop_control(request: int, arg: int) -> int:
    fd = os.open(LOOP_CONTROL, os.O_RDWR | os.O_CLOEXEC)
    try:
        return fcntl.ioctl(fd, request, arg)
    finally:
        os.close(fd)


def _remove(index: int) -> None:
    for _ in range(REMOVE_TRIES):
        try:
            _loop_control(LOOP_CTL_REMOVE, index)
            return
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise RuntimeError(f"removing loop{index}: {e.strerror}") from None
            time.sleep(0.1)
    raise RuntimeError(f"removing loop{index}: still busy after {REMOVE_TRIES * 0.1:g} s")


def _exit_on_term(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)

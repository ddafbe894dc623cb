"""Helpers of the signal-plane tests and benchmarks: frames read while a command runs, BPF ids."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from xtune.signals.frames import Frame, FrameReader


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{os.urandom(3).hex()}"


def bpf_ids_of(pid: int) -> set[tuple[str, int]]:
    """("prog" | "link", id) of every BPF program and link a process holds (from its fdinfo)."""
    ids: set[tuple[str, int]] = set()
    for fdinfo in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            text = fdinfo.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key in ("prog_id", "link_id"):
                ids.add((key[:-3], int(value)))
    return ids


def bpf_ids_alive(ids: set[tuple[str, int]], grace: float = 5.0) -> set[tuple[str, int]]:
    """Those of `ids` still in the kernel after `grace` seconds (the kernel frees them after RCU)."""
    deadline = time.monotonic() + grace
    while True:
        alive = set()
        for kind in ("prog", "link"):
            out = subprocess.run(["bpftool", "-j", kind, "show"], capture_output=True, text=True, check=True)
            alive |= {(kind, obj["id"]) for obj in json.loads(out.stdout or "[]")}
        if not ids & alive or time.monotonic() > deadline:
            return ids & alive
        time.sleep(0.1)


def frames_while(reader: FrameReader, work: Callable[[], object], settle: float = 0.2) -> list[Frame]:
    """Frames from just before `work()` starts until `settle` seconds after it returned."""
    frames: list[Frame] = []
    done = threading.Event()
    box: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as e:  # re-raised in the test's thread
            box.append(e)
        finally:
            done.set()

    first = reader.poll(10)
    assert first is not None, "no frame within 10 s"
    thread = threading.Thread(target=run)
    thread.start()
    end = None
    while end is None or time.monotonic() < end:
        frame = reader.poll(1)
        if frame is not None:
            frames.append(frame)
        if end is None and done.is_set():
            end = time.monotonic() + settle
    thread.join()
    if box:
        raise box[0]
    return frames


def total(frames: list[Frame], name: str) -> float:
    return sum(f.values[name] for f in frames)

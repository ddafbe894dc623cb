"""`xtune` ended by SIGTERM (timeout, systemd, a closed terminal) cleans up as Ctrl-C does.

A demo stopped while its bufferbloat phase runs owns network namespaces, a bulk flow between
them and a private xobserve and xrtd: after SIGTERM none of them may be left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from xtune import paths

pytestmark = pytest.mark.root


def namespaces(prefix: str) -> list[str]:
    return (
        [n for n in os.listdir("/run/netns") if n.startswith(prefix)] if os.path.isdir("/run/netns") else []
    )


def descendants(pid: int) -> set[int]:
    """Every process whose chain of parents reaches `pid`."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, grew = {pid}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in found} - found
        found |= more
        grew = bool(more)
    return found - {pid}


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace").replace("\0", " ")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigterm_mid_demo_leaves_no_namespace_process_or_daemon(tmp_path: Path) -> None:
    demo = subprocess.Popen(
        [str(paths.ROOT / ".venv/bin/xtune"), "demo", "--short", "--out", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"COLUMNS": "200", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )
    prefix = f"xtdemo-{demo.pid}-"
    try:
        deadline = time.monotonic() + 120
        # Wait until the first phase owns its namespaces and its bulk flow runs in them.
        while time.monotonic() < deadline and demo.poll() is None:
            if namespaces(prefix) and any("xtune-bulk" in cmdline(p) for p in descendants(demo.pid)):
                break
            time.sleep(0.2)
        assert demo.poll() is None, f"the demo ended before it was stopped: {demo.stdout.read()[-2000:]}"  # type: ignore[union-attr]
        assert namespaces(prefix), "the demo never created its namespaces"
        children = descendants(demo.pid)
        demo.send_signal(signal.SIGTERM)
        out, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    try:
        assert demo.returncode == 128 + signal.SIGTERM, out[-2000:]
        assert not namespaces(prefix), f"left behind: {namespaces(prefix)}"
        deadline = time.monotonic() + 10  # daemons stopped by SIGTERM restore and exit on their own
        while time.monotonic() < deadline and any(alive(p) for p in children):
            time.sleep(0.1)
        left = [cmdline(p) for p in children if alive(p)]
        assert not left, f"processes left running: {left}"
    finally:  # whatever the demo left is the test's to remove, so the host stays as it was
        for p in children:
            if alive(p):
                os.kill(p, signal.SIGTERM)
        for name in namespaces(prefix):
            subprocess.run(["ip", "netns", "del", name], check=False)

"""The QEMU harness's handling of a stalled guest, with a stand-in for qemu-system-x86_64
(the real boot is covered by test_kernel_sie.py)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from xtune import paths

RUN_GUEST = paths.ROOT / "kmod" / "harness" / "run-guest.sh"

# Writes the console named by "-serial file:PATH"; the Nth boot's console text comes from $BOOTS/N.
FAKE_QEMU = """#!/usr/bin/env bash
for a in "$@"; do case "$a" in file:*) log=${a#file:};; esac; done
n=$(( $(cat "$BOOTS/count" 2>/dev/null || echo 0) + 1 )); echo $n > "$BOOTS/count"
echo "$@" > "$BOOTS/args"
cat "$BOOTS/$n" > "$log"
grep -q "soft lockup" "$log" && sleep 60
exit 0
"""


def run(tmp_path: Path, consoles: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "qemu-system-x86_64").write_text(FAKE_QEMU)
    (fake / "qemu-system-x86_64").chmod(0o755)
    boots = tmp_path / "boots"
    boots.mkdir()
    for i, text in enumerate(consoles, 1):
        (boots / str(i)).write_text(text)
    env_file = tmp_path / "kernel.env"
    env_file.write_text("KERNEL_VMLINUZ=/nonexistent\n")
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", BOOTS=str(boots))
    start = time.monotonic()
    cmd = [str(RUN_GUEST), str(env_file), "/nonexistent", str(tmp_path / "console.log"), "30"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return done, time.monotonic() - start


LOCKUP = "watchdog: BUG: soft lockup - CPU#1 stuck for 45s! [sh:1]\n"
# What xsiectl writes through printk before every arm (kmod/guest/xsiectl.c, mark_arming).
ARMING = "[   41.2] XSIE-ARMING id=0 mode=immediate\n"


def test_a_stall_before_anything_was_armed_is_stopped_and_retried_once(tmp_path: Path) -> None:
    stall = "XSIE-TEST-START tests/10_blk_plug.sh\nXSIE-RESULT blk_baseline PASS 32\n" + LOCKUP
    done, took = run(tmp_path, [stall, "XSIE-DONE\n"])
    assert done.returncode == 0, done.stderr
    assert "stalled" in done.stderr
    assert (tmp_path / "console.log.stalled").read_text() == stall
    assert took < 20, "the stalled boot should be stopped when the lockup shows, not at the time limit"


def test_a_stall_after_arming_fails_without_a_retry(tmp_path: Path) -> None:
    """A stall after arming may be the module's: retrying it could hide a bug in xsie.ko."""
    stall = "XSIE-TEST-START tests/10_blk_plug.sh\n" + ARMING + "XSIE-RESULT blk_arm PASS\n" + LOCKUP
    done, took = run(tmp_path, [stall, "XSIE-DONE\n"])
    assert done.returncode == 1 and "stalled after a const was armed" in done.stderr
    assert (tmp_path / "boots" / "count").read_text().strip() == "1"
    assert (tmp_path / "console.log").read_text() == stall
    assert took < 20, "the stalled boot should be stopped when the lockup shows, not at the time limit"


def test_a_second_stall_fails(tmp_path: Path) -> None:
    done, _ = run(tmp_path, [LOCKUP, LOCKUP])
    assert done.returncode == 1 and "did not finish" in done.stderr


def test_the_vcpus_share_one_host_thread(tmp_path: Path) -> None:
    """A thread per vCPU (MTTCG) let one vCPU stop for good on a loaded host (kmod/README.md)."""
    done, _ = run(tmp_path, ["XSIE-DONE\n"])
    assert done.returncode == 0
    args = (tmp_path / "boots" / "args").read_text().split()
    assert args[args.index("-accel") + 1] == "tcg,thread=single" and args[args.index("-smp") + 1] == "2"


def test_a_failure_without_a_stall_is_not_retried(tmp_path: Path) -> None:
    done, _ = run(tmp_path, ["XSIE-RESULT x FAIL broken\n", "XSIE-DONE\n"])
    assert done.returncode == 1
    assert (tmp_path / "boots" / "count").read_text().strip() == "1"

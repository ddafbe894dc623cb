"""Interrupting a case run while `xtune run` tunes: the command gets SIGTERM and time to unwind (its
workload and namespaces go), and SIGKILL only if it does not end within the grace period."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from cases.run import run_unwinding

# A stand-in for `xtune run`: says it is ready, then waits; on SIGTERM it "unwinds" (writes a
# file) and exits, as xtune's unwind_on_termination does. With `ignore`, it ignores SIGTERM.
CHILD = """
import os, signal, sys, time
from pathlib import Path
here = Path(sys.argv[1])
def unwind(_s, _f):
    (here / "unwound").write_text("yes")
    sys.exit(143)
signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[2] == "ignore" else unwind)
(here / "pid").write_text(str(os.getpid()))
time.sleep(600)
"""


def interrupt_when_ready(ready: Path) -> threading.Thread:
    """Ctrl-C in the caller once the child runs: a real SIGINT to the main thread, which breaks its
    wait for the child (_thread.interrupt_main sets only the flag, checked after the wait)."""

    def wait_then_interrupt() -> None:
        while not ready.exists():
            time.sleep(0.02)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    t = threading.Thread(target=wait_then_interrupt, daemon=True)
    t.start()
    return t


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("mode", ["unwind", "ignore"])
def test_an_interrupted_run_terminates_its_command_then_kills_it(tmp_path: Path, mode: str) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    t = interrupt_when_ready(tmp_path / "pid")
    with pytest.raises(KeyboardInterrupt):
        run_unwinding([sys.executable, str(script), str(tmp_path), mode], tmp_path / "log", grace_s=1.0)
    t.join()
    pid = int((tmp_path / "pid").read_text())
    assert gone(pid)
    # The command that handles SIGTERM unwound (subprocess.run would have SIGKILLed it: no file);
    # the one that ignores it was killed after the grace period.
    assert (tmp_path / "unwound").exists() == (mode == "unwind")


def test_a_finished_command_gives_its_exit_code_and_output(tmp_path: Path) -> None:
    log = tmp_path / "log"
    cmd = [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"]
    assert run_unwinding(cmd, log) == 3
    assert log.read_text().split() == ["out", "err"]

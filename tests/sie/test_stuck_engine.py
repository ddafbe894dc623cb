"""An engine that stops serving (here: SIGSTOPped) makes a test fail at once with where it was
stuck, never hang: its process, killed, cannot be reaped while its tracer does not reap it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import targets
from xtune.sie import attach as eng
from xtune.testing import sie_oracle as oracle


def test_close_names_and_kills_a_stuck_engine(engine):
    table = targets.analyzed("mt_target", [100, 50, 300])
    t = oracle.Target(Path(table.binary.path))
    server = 0
    try:
        t.ask([1])
        server = eng.attach(t.p.pid, table, ["K"], force_int3=True).server
        os.kill(server, signal.SIGSTOP)
        with pytest.raises(AssertionError, match=rf"the engine \(pid {server}\) is in state T"):
            t.close()
        assert t.p.returncode == -signal.SIGKILL, "the target is reaped once its engine is gone"
        assert not Path(f"/proc/{server}").exists(), "the stuck engine was killed"
    finally:
        if t.p.returncode is None:  # a check above failed: free the target, then reap it
            if server:
                os.kill(server, signal.SIGKILL)
            t.p.kill()
            t.p.wait()

"""The optional workload an SLO file names: xtune starts it, restarts it after a change, stops it."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time

from xtune.config.schema import Workload as WorkloadConfig


class Workload:
    def __init__(self, config: WorkloadConfig) -> None:
        self.config = config
        self.proc: subprocess.Popen[bytes] | None = None
        fd, self.log_path = tempfile.mkstemp(prefix="xtune-workload-", suffix=".log")
        os.close(fd)

    def start(self) -> None:
        cmd = list(self.config.command)
        if self.config.netns:
            cmd = ["ip", "netns", "exec", self.config.netns, *cmd]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
        time.sleep(self.config.ready_ms / 1000)
        if self.proc.poll() is not None:
            raise RuntimeError(f"workload {cmd[0]} exited with {self.proc.returncode}: {self.tail()}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(self.config.stop_timeout_ms / 1000)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def tail(self, lines: int = 5) -> str:
        with open(self.log_path, errors="replace") as f:
            return " | ".join(f.read().splitlines()[-lines:])

    def close(self) -> None:
        self.stop()
        os.unlink(self.log_path)

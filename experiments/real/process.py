"""A program a benchmark or test started, as `proc`: its pid, and a stop that waits for it."""

from __future__ import annotations

import subprocess


class Started:
    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)

"""An xrtd instance in a private tmp dir and sysctls read in a netns, for tests and benchmarks."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from xtune import paths
from xtune.knobs.table import KnobClient


class Xrtd:
    """One xrtd with its own socket, state dir and table name; restartable over the same state."""

    def __init__(self, tmp: Path, *args: str) -> None:
        self.socket = str(tmp / "xrtd.sock")
        self.state_dir = tmp / "state"
        self.shm = f"xtknobs-test-{os.getpid()}-{os.urandom(3).hex()}"
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tmp / "xrtd.log"
        self._clients: list[KnobClient] = []

    def start(self) -> Xrtd:
        with open(self.log, "ab") as log:
            argv = [
                "--socket",
                self.socket,
                "--state-dir",
                str(self.state_dir),
                "--shm",
                self.shm,
                *self.args,
            ]
            self.proc = subprocess.Popen([str(paths.binary("xrtd")), *argv], stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None:
                raise RuntimeError(f"xrtd exited with {self.proc.returncode}: {self.log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError("xrtd did not create its socket within 10 s")
            time.sleep(0.01)
        return self

    def client(self) -> KnobClient:
        c = KnobClient(self.socket)
        self._clients.append(c)
        return c

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self._drop_socket()

    def stop(self) -> int:
        """SIGTERM and wait: xrtd restores the originals before exiting."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        self._drop_socket()
        return code

    def _drop_socket(self) -> None:
        for c in self._clients:
            c.close()
        self._clients.clear()
        # A killed xrtd leaves its socket file; the next start replaces it, waiting needs it gone.
        if os.path.exists(self.socket):
            os.unlink(self.socket)

    def journal(self) -> list[str]:
        return (self.state_dir / "journal").read_text().splitlines()

    def audit(self) -> str:
        return (self.state_dir / "audit.log").read_text()

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        for c in self._clients:
            c.close()
        if os.path.exists(f"/dev/shm/{self.shm}"):
            os.unlink(f"/dev/shm/{self.shm}")


def sysctl_in(ns: str, key: str) -> str:
    path = "/proc/sys/" + key.replace(".", "/")
    return subprocess.run(
        ["ip", "netns", "exec", ns, "cat", path], check=True, capture_output=True, text=True
    ).stdout.strip()

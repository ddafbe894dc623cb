"""Private instances of the two daemons a tuning job talks to: xobserve and xrtd.

Each gets unique names (shared-memory ring and knob table, ZeroMQ port, control socket, state
dir) so a demo, a test and a benchmark can run side by side with the system's own instances.
Both are stopped on exit; xrtd restores every knob it still holds when it gets SIGTERM.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from xtune import paths
from xtune.host.netns import Setup


def free_port(kind: socket.SocketKind = socket.SOCK_STREAM) -> int:
    """A port of 127.0.0.1 free at the time of the call (TCP, or UDP with socket.SOCK_DGRAM)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Services(Setup):
    families: list[str]
    funcs: list[str] = field(default_factory=list)
    window_ms: int = 10
    observe: bool = True  # False: xrtd alone (a job whose windows come from a benchmark's output)
    allow: list[str] = field(default_factory=list)  # xrtd --allow BACKEND:GLOB (replaces its defaults)
    rt_priority: int = 0  # SCHED_FIFO for xrtd's watcher and xobserve's window loop, 0 = short slices
    # Only this process in the func family: uprobes sit on the binary's file, so another process
    # running the same binary (a second server, another demo) would enter the signals too.
    pid: int = 0
    tag: str = field(default_factory=lambda: f"xtune-{os.getpid()}-{os.urandom(3).hex()}")
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="xtune-svc-")))
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def signals_shm(self) -> str:
        return f"{self.tag}.signals"

    @property
    def knobs_shm(self) -> str:
        return f"{self.tag}.knobs"

    @property
    def xrtd_socket(self) -> str:
        return str(self.dir / "xrtd.sock")

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - owned by the child
        proc = subprocess.Popen([str(paths.binary(name)), *args], stdout=log, stderr=log)
        log.close()
        self.procs.append(proc)
        return proc

    def _wait_for(self, what: Path, proc: subprocess.Popen[bytes], name: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not what.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (self.dir / f"{name}.log").read_text(errors="replace")[-800:]
                raise RuntimeError(f"{name} did not start ({what} missing): {log}")
            time.sleep(0.05)

    def _create(self) -> None:
        (self.dir / "state").mkdir()
        xrtd = self._spawn(
            "xrtd",
            ["--socket", self.xrtd_socket, "--state-dir", str(self.dir / "state"), "--shm", self.knobs_shm]
            + [arg for rule in self.allow for arg in ("--allow", rule)]
            + self._rt_args(),
        )
        self._wait_for(Path(self.xrtd_socket), xrtd, "xrtd")
        if not self.observe:
            return
        args = ["--families", ",".join(self.families), "--window-ms", str(self.window_ms)]
        args += ["--shm", self.signals_shm, "--zmq", f"tcp://127.0.0.1:{free_port()}"]
        for f in self.funcs:
            args += ["--func", f]
        if self.pid:
            args += ["--pid", str(self.pid)]
        xobserve = self._spawn("xobserve", args + self._rt_args())
        self._wait_for(Path("/dev/shm") / self.signals_shm, xobserve, "xobserve")

    def _rt_args(self) -> list[str]:
        return ["--rt-priority", str(self.rt_priority)] if self.rt_priority else []

    def log(self, name: str) -> str:
        return (self.dir / f"{name}.log").read_text(errors="replace")

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()
        for shm in (self.signals_shm, self.knobs_shm):
            Path("/dev/shm", shm).unlink(missing_ok=True)
        shutil.rmtree(self.dir, ignore_errors=True)

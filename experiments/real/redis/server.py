"""A redis-server binary on a free loopback port, and redis-benchmark against it."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from real.process import Started

# No persistence, no protected mode: a scratch server whose only state is what the workload sets.
ARGS = ["--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--enable-debug-command", "yes"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server(Started):
    def __init__(self, binary: Path, workdir: Path) -> None:
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / f"redis-{self.port}.log"
        argv = [
            str(binary),
            "--port",
            str(self.port),
            "--dir",
            str(workdir),
            "--logfile",
            str(self.log),
            *ARGS,
        ]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{binary} exited with {self.proc.returncode}: {self.log.read_text()[-500:]}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{binary} did not answer on port {self.port} within 10 s") from None
                time.sleep(0.05)


def benchmark(port: int, args: list[str]) -> float:
    """Requests per second that redis-benchmark reports (its --csv line)."""
    r = subprocess.run(
        ["redis-benchmark", "-p", str(port), "--csv", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    row = r.stdout.strip().splitlines()[-1].split(",")
    return float(row[1].strip('"'))

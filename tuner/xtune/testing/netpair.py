"""Bulk TCP flows with a chosen congestion control across a veth pair (`xtune.host.netns`) with a
rate-limited (tbf) bottleneck, shared by tests and the benchmark.

netem is not built into this kernel, so the delay HyStart reacts to is queueing delay at the
tbf bottleneck: a flow in slow start fills the queue and its RTT rises by tens of ms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from xtune.host.netns import VethPair, run

SENDER = r"""
import json, socket, sys, time
host, port, cc, nbytes, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
chunk = b"x" * 65536
for _ in range(count):
    s = socket.socket()
    if cc != "default":
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    t0 = time.perf_counter()
    s.connect((host, port))
    left = nbytes
    while left > 0:
        left -= s.send(chunk[: min(left, len(chunk))])
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    dt = time.perf_counter() - t0
    used = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
    s.close()
    print(json.dumps({"cc": used, "bytes": nbytes, "seconds": dt}), flush=True)
"""

RECEIVER = r"""
import socket, sys
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2])))
srv.listen(8)
print("ready", flush=True)
while True:
    c, _ = srv.accept()
    while c.recv(1 << 20):
        pass
    c.send(b"k")
    c.close()
"""


@dataclass
class Flow:
    cc: str
    bytes: int
    seconds: float

    @property
    def mbps(self) -> float:
        return self.bytes * 8 / self.seconds / 1e6


class BulkPath:
    """Bulk TCP flows from the client namespace of a `VethPair` (the sender) to a receiver in its
    server namespace. With a `rate`, a tbf qdisc on the sender's veth is the bottleneck; without,
    the veth runs at CPU speed. `a` and `b` name the sender's and the receiver's namespaces."""

    def __init__(self, tag: str, rate: str | None = "50mbit", queue_latency: str = "100ms") -> None:
        self.pair = VethPair(prefix=tag)
        self.a, self.b = self.pair.client, self.pair.server
        self.rate, self.queue_latency = rate, queue_latency
        self.port = 5201
        self._receiver: subprocess.Popen[str] | None = None

    def __enter__(self) -> BulkPath:
        self.pair.__enter__()
        try:
            if self.rate:
                tbf = f"tc qdisc add dev {self.pair.client_dev} root tbf rate {self.rate} burst 32kb"
                run("ip", "netns", "exec", self.a, *tbf.split(), "latency", self.queue_latency)
            addr = self.pair.server_addr
            self._receiver = subprocess.Popen(
                ["ip", "netns", "exec", self.b, sys.executable, "-c", RECEIVER, addr, str(self.port)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert self._receiver.stdout is not None
            if self._receiver.stdout.readline().strip() != "ready":
                raise RuntimeError("flow receiver did not start")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._receiver is not None:
            self._receiver.kill()
            self._receiver.wait()
        self.pair.close()

    def flows(self, cc: str, nbytes: int, count: int = 1) -> list[Flow]:
        """Run `count` bulk transfers of `nbytes` from a to b, one after another.

        `cc` is set per socket (TCP_CONGESTION); "default" uses the namespace's global choice.
        """
        args = [self.a, sys.executable, "-c", SENDER, self.pair.server_addr, str(self.port), cc]
        out = subprocess.run(
            ["ip", "netns", "exec", *args, str(nbytes), str(count)],
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        )
        flows = [Flow(**json.loads(line)) for line in out.stdout.splitlines()]
        for f in flows:
            if cc != "default" and f.cc != cc:
                raise RuntimeError(f"flow ran with {f.cc}, not {cc}")
        return flows


def unique_tag(prefix: str = "xtk") -> str:
    return f"{prefix}-{os.getpid() % 100000}-{int(time.monotonic() * 1000) % 100000}"

"""Two network namespaces joined by a veth pair, with a rate-limited (tbf) bottleneck, and
bulk TCP flows across it with a chosen congestion control (shared by tests and the benchmark).

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


class VethPair:
    """netns `<tag>-a` (sender, 10.203.0.1) ⇄ `<tag>-b` (receiver, 10.203.0.2).

    With a `rate`, a tbf qdisc on a's side is the bottleneck; without, the veth runs at CPU speed.
    """

    def __init__(self, tag: str, rate: str | None = "50mbit", queue_latency: str = "100ms") -> None:
        self.a, self.b = f"{tag}-a", f"{tag}-b"
        self.rate, self.queue_latency = rate, queue_latency
        self.port = 5201
        self._receiver: subprocess.Popen[str] | None = None

    def __enter__(self) -> VethPair:
        try:
            for ns in (self.a, self.b):
                _ip("netns", "add", ns)
            _ip(*f"link add xtv0 netns {self.a} type veth peer name xtv1 netns {self.b}".split())
            for ns, addr, dev in ((self.a, "10.203.0.1/24", "xtv0"), (self.b, "10.203.0.2/24", "xtv1")):
                _ip("-n", ns, "addr", "add", addr, "dev", dev)
                _ip("-n", ns, "link", "set", dev, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
            if self.rate:
                tbf = (
                    f"tc qdisc add dev xtv0 root tbf rate {self.rate} burst 32kb latency {self.queue_latency}"
                )
                subprocess.run(["ip", "netns", "exec", self.a, *tbf.split()], check=True, capture_output=True)
            self._receiver = subprocess.Popen(
                ["ip", "netns", "exec", self.b, sys.executable, "-c", RECEIVER, "10.203.0.2", str(self.port)],
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
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def flows(self, cc: str, nbytes: int, count: int = 1) -> list[Flow]:
        """Run `count` bulk transfers of `nbytes` from a to b, one after another.

        `cc` is set per socket (TCP_CONGESTION); "default" uses the namespace's global choice.
        """
        args = [
            self.a,
            sys.executable,
            "-c",
            SENDER,
            "10.203.0.2",
            str(self.port),
            cc,
            str(nbytes),
            str(count),
        ]
        out = subprocess.run(
            ["ip", "netns", "exec", *args], check=True, capture_output=True, text=True, timeout=300
        )
        flows = [Flow(**json.loads(line)) for line in out.stdout.splitlines()]
        for f in flows:
            if cc != "default" and f.cc != cc:
                raise RuntimeError(f"flow ran with {f.cc}, not {cc}")
        return flows


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def unique_tag(prefix: str = "xtk") -> str:
    return f"{prefix}-{os.getpid() % 100000}-{int(time.monotonic() * 1000) % 100000}"

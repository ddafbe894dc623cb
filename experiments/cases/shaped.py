"""The network case's path: client and server namespaces joined through a router namespace whose
egress toward the client is the bottleneck, shaped by tc.

    <p>-cl (10.N.1.1) ── veth ── <p>-rt ── veth ── <p>-sv (10.N.2.2)
                  tbf RATE_MBIT, a drop-tail queue of QUEUE_MS

The bulk and the responses flow server -> client through the router's tbf, so a sender that
fills the queue makes every response wait behind it, as at a real bottleneck router (the queue
is not on the sender's own device, where TCP Small Queues would hold it back). This kernel has
no netem (nor fq, fq_codel): the path adds no propagation delay, so its round trip is the veths'
(well under a millisecond) and every millisecond above it is the router's queue. Only the router
forwards; every namespace is deleted on exit, and the host's own namespace and
devices are never touched.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

from xtune.host.netns import run

RATE_MBIT = 40
QUEUE_MS = 100  # the router's queue, as time at the bottleneck's rate (500 KB at 40 Mbit/s)


@dataclass
class ShapedPath:
    prefix: str = field(default_factory=lambda: f"xtn-{os.getpid() % 100000}-{os.urandom(2).hex()}")
    subnet: int = field(default_factory=lambda: 100 + int.from_bytes(os.urandom(1)) % 100)
    created: list[str] = field(default_factory=list)

    @property
    def client(self) -> str:
        return f"{self.prefix}-cl"

    @property
    def router(self) -> str:
        return f"{self.prefix}-rt"

    @property
    def server(self) -> str:
        return f"{self.prefix}-sv"

    @property
    def client_addr(self) -> str:
        return f"10.{self.subnet}.1.1"

    @property
    def server_addr(self) -> str:
        return f"10.{self.subnet}.2.2"

    @property
    def bottleneck_dev(self) -> str:
        """The router's device toward the client: its egress qdisc is the bottleneck."""
        return f"rc{self._tag}"

    @property
    def _tag(self) -> str:
        return self.prefix.replace("-", "")[-8:]

    def __enter__(self) -> ShapedPath:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _create(self) -> None:
        for ns in (self.client, self.router, self.server):
            run("ip", "netns", "add", ns)
            self.created.append(ns)
            run("ip", "-n", ns, "link", "set", "lo", "up")
        n = self.subnet
        # (end namespace, its device, the side's subnet 10.N.side.0/24, the router's device there)
        sides = (
            (self.client, f"c{self._tag}", 1, self.bottleneck_dev),
            (self.server, f"s{self._tag}", 2, f"rs{self._tag}"),
        )
        for ns, dev, side, rdev in sides:
            run("ip", "link", "add", dev, "netns", ns, "type", "veth", "peer", "name", rdev,
                "netns", self.router)  # fmt: skip
            run("ip", "-n", ns, "addr", "add", f"10.{n}.{side}.{side}/24", "dev", dev)
            run("ip", "-n", self.router, "addr", "add", f"10.{n}.{side}.254/24", "dev", rdev)
            run("ip", "-n", ns, "link", "set", dev, "up")
            run("ip", "-n", self.router, "link", "set", rdev, "up")
            run("ip", "-n", ns, "route", "add", "default", "via", f"10.{n}.{side}.254")
        run("ip", "netns", "exec", self.router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        queue_bytes = RATE_MBIT * 125_000 * QUEUE_MS // 1000
        run("tc", "-n", self.router, "qdisc", "add", "dev", self.bottleneck_dev, "root", "tbf",
            "rate", f"{RATE_MBIT}mbit", "burst", "16kb", "limit", str(queue_bytes))  # fmt: skip

    def close(self) -> None:
        while self.created:
            subprocess.run(["ip", "netns", "del", self.created.pop()], check=False, capture_output=True)

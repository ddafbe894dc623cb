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

from dataclasses import dataclass, field

from xtune.host.netns import Namespaces, address, run, unique_prefix, veth

RATE_MBIT = 40
QUEUE_MS = 100  # the router's queue, as time at the bottleneck's rate (500 KB at 40 Mbit/s)


@dataclass
class ShapedPath(Namespaces):
    prefix: str = field(default_factory=lambda: unique_prefix("xtn"))

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

    def _create(self) -> None:
        self._add(self.client, self.router, self.server)
        n = self.subnet
        # (end namespace, its device, the side's subnet 10.N.side.0/24, the router's device there)
        sides = (
            (self.client, f"c{self._tag}", 1, self.bottleneck_dev),
            (self.server, f"s{self._tag}", 2, f"rs{self._tag}"),
        )
        for ns, dev, side, rdev in sides:
            veth(dev, ns, rdev, self.router)
            address(ns, dev, f"10.{n}.{side}.{side}/24")
            address(self.router, rdev, f"10.{n}.{side}.254/24")
            run("ip", "-n", ns, "route", "add", "default", "via", f"10.{n}.{side}.254")
        run("ip", "netns", "exec", self.router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        queue_bytes = RATE_MBIT * 125_000 * QUEUE_MS // 1000
        run("tc", "-n", self.router, "qdisc", "add", "dev", self.bottleneck_dev, "root", "tbf",
            "rate", f"{RATE_MBIT}mbit", "burst", "16kb", "limit", str(queue_bytes))  # fmt: skip

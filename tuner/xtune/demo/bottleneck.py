"""The demo's network: sender and receiver namespaces joined through a router with a bottleneck.

    <p>-s (10.N.1.1) ── veth ── <p>-r (router, TBF rate R, deep queue) ── veth ── <p>-c (10.N.2.1)

The router's token bucket queue is deep (`queue_ms` of traffic), the sender uses CUBIC, so the
receive/send buffer limits (per-namespace `net.ipv4.tcp_rmem` / `tcp_wmem` maxima) decide how
much data waits in that queue: large buffers fill it (bufferbloat, RTT in the hundreds of ms),
small ones keep RTT near the floor at the same throughput. Everything is torn down on exit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xtune.host import netns
from xtune.host.netns import Namespaces, address, run, unique_prefix, veth


@dataclass
class Bottleneck(Namespaces):
    rate_mbit: int = 100
    queue_ms: int = 500
    prefix: str = field(default_factory=lambda: unique_prefix("xtdemo"))

    @property
    def sender(self) -> str:
        return f"{self.prefix}-s"

    @property
    def router(self) -> str:
        return f"{self.prefix}-r"

    @property
    def receiver(self) -> str:
        return f"{self.prefix}-c"

    @property
    def receiver_addr(self) -> str:
        return f"10.{self.subnet}.2.1"

    @staticmethod
    def path(name: str) -> str:
        return netns.path(name)

    def _create(self) -> None:
        s, r, c, n, tag = self.sender, self.router, self.receiver, self.subnet, self._tag
        self._add(s, r, c)
        veth(f"s{tag}", s, f"r{tag}", r)
        veth(f"q{tag}", r, f"c{tag}", c)
        for ns, dev, addr in (
            (s, f"s{tag}", f"10.{n}.1.1/24"),
            (r, f"r{tag}", f"10.{n}.1.2/24"),
            (r, f"q{tag}", f"10.{n}.2.2/24"),
            (c, f"c{tag}", f"10.{n}.2.1/24"),
        ):
            address(ns, dev, addr)
        run("ip", "-n", s, "route", "add", "default", "via", f"10.{n}.1.2")
        run("ip", "-n", c, "route", "add", "default", "via", f"10.{n}.2.2")
        run("ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        # Each trial starts a fresh connection: do not seed it with the last one's RTT/ssthresh.
        for ns in (s, c):
            run("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1")
        run(
            "ip", "netns", "exec", r, "tc", "qdisc", "add", "dev", f"q{tag}", "root", "tbf",
            "rate", f"{self.rate_mbit}mbit", "burst", "64kb", "latency", f"{self.queue_ms}ms",
        )  # fmt: skip

    def sysctl(self, name: str, key: str) -> str:
        value = netns.sysctl(name, key)
        if value is None:
            raise KeyError(f"no sysctl {key} in namespace {name}")
        return value

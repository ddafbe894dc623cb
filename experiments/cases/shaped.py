"""The network case's path: client and server namespaces joined through a router namespace that
delays every packet (a propagation delay) and whose egress toward the client is the bottleneck,
shaped by tc.

    <p>-cl (10.N.1.1) ── veth ── <p>-rt ── veth ── <p>-sv (10.N.2.2)
                  tbf RATE_MBIT, a        │ xtune-delay: RTT_MS / 2 each way,
                  drop-tail queue of      │ on a TUN device (d<tag>)
                  QUEUE_MS

The bulk and the responses flow server -> client through the router's tbf, so a sender that
fills the queue makes every response wait behind it, as at a real bottleneck router (the queue
is not on the sender's own device, where TCP Small Queues would hold it back). This kernel has
no netem (nor fq, fq_codel), so the delay is a program of the case's own (`delay.c`, built by
`make build` as build/bin/xtune-delay) in the router namespace: policy routes send what arrives
on either veth into its TUN device, it holds each packet RTT_MS / 2 and writes it back, and the
kernel forwards it on (toward the client, through the tbf). If the program is gone, a blackhole
rule drops the path's packets: the path never silently loses its delay. Only the router
forwards; the program stops and every namespace is deleted on exit, and the host's own
namespace and devices are never touched.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any

from xtune import paths
from xtune.host.netns import Namespaces, address, run, unique_prefix, veth

RATE_MBIT = 40
RTT_MS = 40  # the propagation round trip, half of it each way
QUEUE_MS = 100  # the router's queue, as time at the bottleneck's rate (500 KB at 40 Mbit/s)
DELAY_TABLE = "100"  # the router's routing table whose one route is the delay's device


@dataclass
class ShapedPath(Namespaces):
    prefix: str = field(default_factory=lambda: unique_prefix("xtn"))
    delay: subprocess.Popen[str] | None = None
    # The delay program's counts (forwarded, dropped_*, ...) read when it stopped; None before.
    delay_counts: dict[str, Any] | None = None

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
    def delay_dev(self) -> str:
        """The router's TUN device, owned by the delay program."""
        return f"d{self._tag}"

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
        self._start_delay([rdev for _ns, _dev, _side, rdev in sides])

    def _start_delay(self, router_devs: list[str]) -> None:
        """The delay program on its TUN device, and the routes that pass every packet arriving on
        the router's veths through it (what it writes back arrives on the TUN device and takes
        the main table's routes)."""
        # `ip netns exec` execs the program, so this process is its parent (and --parent's pid).
        cmd = ["ip", "netns", "exec", self.router, str(paths.binary("xtune-delay")),
               "--dev", self.delay_dev, "--delay-us", str(RTT_MS * 1000 // 2),
               "--parent", str(os.getpid())]  # fmt: skip
        self.delay = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.delay.stdout is not None
        if self.delay.stdout.readline().strip() != f"ready {self.delay_dev}":
            raise RuntimeError(f"xtune-delay did not start: {self.delay.communicate()[1].strip()!r}")
        r = self.router
        # A packet written back arrives from the server's address on a device that is not its
        # route: the reverse-path filter (max of `all` and the device's) must be off for it.
        for conf in ("all", self.delay_dev):
            run("ip", "netns", "exec", r, "sysctl", "-qw", f"net.ipv4.conf.{conf}.rp_filter=0")
        # Room for a sender's burst in the device's queue until the program reads it.
        run("ip", "-n", r, "link", "set", self.delay_dev, "txqueuelen", "10000", "up")
        run("ip", "-n", r, "route", "add", "default", "dev", self.delay_dev, "table", DELAY_TABLE)
        for dev in router_devs:
            run("ip", "-n", r, "rule", "add", "pref", "100", "iif", dev, "lookup", DELAY_TABLE)
            # Without the device (the program gone) table 100 is empty: drop, never skip the delay.
            run("ip", "-n", r, "rule", "add", "pref", "101", "iif", dev, "blackhole")

    def close(self) -> None:
        """The delay program first (it holds the router namespace), its counts kept; then the
        namespaces."""
        if self.delay is not None:
            if self.delay.poll() is None:
                self.delay.terminate()
            try:
                out, _err = self.delay.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.delay.kill()
                out, _err = self.delay.communicate()
            last = out.strip().splitlines()[-1:] if out else []
            self.delay_counts = json.loads(last[0]) if last and last[0].startswith("{") else None
            self.delay = None
        super().close()

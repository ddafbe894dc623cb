"""Network namespaces for workloads: `ip` helpers and a client/server pair joined by one veth.

    <p>-cl (10.N.0.1) ── veth ── <p>-sv (10.N.0.2)

Servers run in the server namespace, load generators in the client's; per-namespace sysctls
(net.core.somaxconn, net.ipv4.tcp_*) of the server namespace are then the server's alone.
Everything created is deleted on exit.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field


def run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True)


def path(netns: str) -> str:
    """The namespace's file, as xrtd's `netns` and `setns()` take it."""
    return f"/run/netns/{netns}"


def sysctl(netns: str | None, key: str) -> str | None:
    """A sysctl's text inside `netns` (None: the host's), or None when it has no such key."""
    cmd = ["sysctl", "-n", key] if netns is None else ["ip", "netns", "exec", netns, "sysctl", "-n", key]
    out = subprocess.run(cmd, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


@dataclass
class VethPair:
    prefix: str = field(default_factory=lambda: f"xtc-{os.getpid() % 100000}-{os.urandom(2).hex()}")
    subnet: int = field(default_factory=lambda: 100 + int.from_bytes(os.urandom(1)) % 100)
    created: list[str] = field(default_factory=list)

    @property
    def client(self) -> str:
        return f"{self.prefix}-cl"

    @property
    def server(self) -> str:
        return f"{self.prefix}-sv"

    @property
    def client_addr(self) -> str:
        return f"10.{self.subnet}.0.1"

    @property
    def server_addr(self) -> str:
        return f"10.{self.subnet}.0.2"

    @property
    def client_dev(self) -> str:
        """The client's end of the veth (where a qdisc shapes what the client sends)."""
        return f"c{self._tag}"

    @property
    def server_dev(self) -> str:
        return f"s{self._tag}"

    @property
    def _tag(self) -> str:
        return self.prefix.replace("-", "")[-8:]

    def __enter__(self) -> VethPair:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _create(self) -> None:
        for ns in (self.client, self.server):
            run("ip", "netns", "add", ns)
            self.created.append(ns)
            run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "link", "add", self.client_dev, "netns", self.client, "type", "veth", "peer", "name",
            self.server_dev, "netns", self.server)  # fmt: skip
        for ns, dev, addr in ((self.client, self.client_dev, 1), (self.server, self.server_dev, 2)):
            run("ip", "-n", ns, "addr", "add", f"10.{self.subnet}.0.{addr}/24", "dev", dev)
            run("ip", "-n", ns, "link", "set", dev, "up")

    def close(self) -> None:
        while self.created:
            subprocess.run(["ip", "netns", "del", self.created.pop()], check=False, capture_output=True)

"""Network namespaces for workloads: `ip` helpers, the base of every setup that creates
namespaces or devices and removes them, and a client/server pair joined by one veth.

    <p>-cl (10.N.0.1) ── veth ── <p>-sv (10.N.0.2)

Servers run in the server namespace, load generators in the client's; per-namespace sysctls
(net.core.somaxconn, net.ipv4.tcp_*) of the server namespace are then the server's alone.
Everything created is deleted on exit.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from typing import Self


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


class Setup:
    """A context manager over what it creates: `_create` makes it, recording each piece as it
    goes, and `close` removes what was recorded. `close` runs on every way out, a failure halfway
    through `_create` (or an interrupt) included, so nothing made is left behind."""

    def __enter__(self) -> Self:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _create(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def unique_prefix(kind: str) -> str:
    """Names of this process's own namespaces, distinct from another run's."""
    return f"{kind}-{os.getpid() % 100000}-{os.urandom(2).hex()}"


def random_subnet() -> int:
    """N of the 10.N.x.0/24 subnets: a run beside another rarely shares it."""
    return 100 + int.from_bytes(os.urandom(1)) % 100


@dataclass
class Namespaces(Setup):
    """Network namespaces named `<prefix>-...`, deleted on exit, the last made first. Device names
    end in `_tag`, the prefix's last 8 characters without dashes (an interface name has at most 15)."""

    prefix: str = field(default_factory=lambda: unique_prefix("xtns"))
    subnet: int = field(default_factory=random_subnet)
    created: list[str] = field(default_factory=list)

    @property
    def _tag(self) -> str:
        return self.prefix.replace("-", "")[-8:]

    def _add(self, *names: str) -> None:
        """Each namespace, recorded for `close`, with its loopback up."""
        for ns in names:
            run("ip", "netns", "add", ns)
            self.created.append(ns)
            run("ip", "-n", ns, "link", "set", "lo", "up")

    def close(self) -> None:
        while self.created:
            subprocess.run(["ip", "netns", "del", self.created.pop()], check=False, capture_output=True)


def veth(end: str, netns: str, peer: str, peer_netns: str) -> None:
    """A veth pair made with its ends already in their namespaces (deleting one deletes both)."""
    run("ip", "link", "add", end, "netns", netns, "type", "veth", "peer", "name", peer, "netns", peer_netns)


def address(netns: str, dev: str, cidr: str) -> None:
    """`cidr` on `dev` in `netns`, and the device up."""
    run("ip", "-n", netns, "addr", "add", cidr, "dev", dev)
    run("ip", "-n", netns, "link", "set", dev, "up")


@dataclass
class VethPair(Namespaces):
    prefix: str = field(default_factory=lambda: unique_prefix("xtc"))

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

    def _create(self) -> None:
        self._add(self.client, self.server)
        veth(self.client_dev, self.client, self.server_dev, self.server)
        address(self.client, self.client_dev, f"{self.client_addr}/24")
        address(self.server, self.server_dev, f"{self.server_addr}/24")

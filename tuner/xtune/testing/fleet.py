"""Hosts simulated on this machine: each a network namespace running its own xrtd and xrtd-bridge.

    root namespace 10.S.I.1 ── veth ── 10.S.I.2 host I's namespace: xrtd + xrtd-bridge (:7207)

The coordinator reaches each host over TCP on its veth address, as it would a machine; the
host's knobs are its namespace's sysctls (xrtd runs inside it). xrtd runs with
`--lease-action original`: a host whose coordinator is lost goes back to what it had.
Keys come from `xrtd-bridge --keygen` into the host's state dir. Everything is removed on close.

A host's daemons are the checkout's build/bin, or, given an image, the agent image's: each daemon a
podman container (docker/podman.sh) in the host's network namespace, with the host's directory
(socket, state, keys) mounted at the same path and /dev/shm (knob table, signal ring) the machine's.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from xtune import paths
from xtune.host import netns
from xtune.signals.curve import ClientKeys
from xtune.testing.images import PODMAN, podman

BRIDGE_PORT = 7207
OBSERVER_PORT = 5557


class SimulatedHost:
    def __init__(self, root: Path, index: int, subnet: int, tag: str, image: str | None = None) -> None:
        self.name = f"h{index}"
        self.image = image  # the agent image the daemons run from; None: the checkout's build/bin
        self.netns = f"xth-{tag}-{index}"
        self.dir = root / self.name
        self.keys_dir = self.dir / "keys"
        self.socket = str(self.dir / "xrtd.sock")
        self.shm = f"xtknobs-{tag}-{index}"
        self.addr = f"10.{subnet}.{index}.2"
        self.bridge = f"tcp://{self.addr}:{BRIDGE_PORT}"
        self._veth = (f"xr{tag}{index}"[:15], f"xh{tag}{index}"[:15], f"10.{subnet}.{index}.1")
        self.xrtd: subprocess.Popen[bytes] | None = None
        self.bridge_proc: subprocess.Popen[bytes] | None = None
        self.observer: subprocess.Popen[bytes] | None = None
        self.signals = f"tcp://{self.addr}:{OBSERVER_PORT}"
        self._signals_shm = f"xtsignals-{tag}-{index}"

    def create(self) -> SimulatedHost:
        self.dir.mkdir(parents=True)
        netns.run("ip", "netns", "add", self.netns)
        netns.run("ip", "-n", self.netns, "link", "set", "lo", "up")
        root_dev, host_dev, root_addr = self._veth
        netns.run("ip", "link", "add", root_dev, "type", "veth",
                  "peer", "name", host_dev, "netns", self.netns)  # fmt: skip
        netns.run("ip", "addr", "add", f"{root_addr}/24", "dev", root_dev)
        netns.run("ip", "link", "set", root_dev, "up")
        netns.run("ip", "-n", self.netns, "addr", "add", f"{self.addr}/24", "dev", host_dev)
        netns.run("ip", "-n", self.netns, "link", "set", host_dev, "up")
        keygen = self._spawn("xrtd-bridge", "--keygen", str(self.keys_dir))
        if keygen.wait() != 0:
            log = (self.dir / "xrtd-bridge.log").read_text()
            raise RuntimeError(f"{self.name}: xrtd-bridge --keygen exited with {keygen.returncode}: {log}")
        return self.start()

    def container(self, name: str) -> str:
        """The name of the container daemon `name` runs in on an image host."""
        return f"{self.netns}-{name}"

    def _spawn(self, name: str, *argv: str) -> subprocess.Popen[bytes]:
        if self.image is None:
            command = ["ip", "netns", "exec", self.netns, str(paths.binary(name))]
        else:  # in the foreground: its output is the log, its exit the daemon's
            command = [
                PODMAN, "run", "--rm", "--replace", "--name", self.container(name), "--privileged",
                "--network", f"ns:/run/netns/{self.netns}",
                "--volume", f"{self.dir}:{self.dir}", "--volume", "/dev/shm:/dev/shm",
                "--volume", "/sys/fs/bpf:/sys/fs/bpf", "--volume", "/sys/kernel/tracing:/sys/kernel/tracing",
                self.image, name,
            ]  # fmt: skip
        with open(self.dir / f"{name}.log", "ab") as log:
            return subprocess.Popen([*command, *argv], stdout=log, stderr=log)

    def _signal(self, name: str, proc: subprocess.Popen[bytes], signum: int) -> None:
        """`signum` to daemon `name`: on an image host through podman (a SIGKILL to `podman run`
        would leave the container running)."""
        if self.image is None:
            proc.send_signal(signum)
        else:
            podman("kill", "--signal", str(int(signum)), self.container(name), check=False)

    def start(self) -> SimulatedHost:
        """Start xrtd and the bridge (again, over the same state dir, after a kill)."""
        # After a kill the old socket file and the old log lines are still there: readiness is a
        # connection xrtd accepts (it replays its journal before it listens) and a line written
        # by this bridge.
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        self.xrtd = self._spawn(
            "xrtd", "--socket", self.socket, "--state-dir", str(self.dir / "state"), "--shm", self.shm,
            "--lease-action", "original",
        )  # fmt: skip
        self._wait(self.xrtd, "xrtd", lambda: _accepts(self.socket))
        log = self.dir / "xrtd-bridge.log"
        seen = log.stat().st_size if log.exists() else 0
        self.bridge_proc = self._spawn(
            "xrtd-bridge", "--xrtd-socket", self.socket, "--keys", str(self.keys_dir),
            "--endpoint", self.bridge,
        )  # fmt: skip
        self._wait(self.bridge_proc, "xrtd-bridge", lambda: b"serving" in log.read_bytes()[seen:])
        return self

    def observe(self, *args: str) -> str:
        """Start xobserve in the host's namespace, publishing on the host's address with CURVE
        (the bridge's keys: the same client is authorized); returns the PUB endpoint."""
        self.observer = self._spawn(
            "xobserve", "--zmq", self.signals, "--zmq-curve", str(self.keys_dir), "--shm", self._signals_shm,
            *args,
        )  # fmt: skip
        return self.signals

    def _wait(self, proc: subprocess.Popen[bytes], name: str, ready: object) -> None:
        limit = 10 if self.image is None else 30  # a container also starts runc and conmon
        deadline = time.monotonic() + limit
        while not ready():  # type: ignore[operator]
            if proc.poll() is not None:
                log = (self.dir / f"{name}.log").read_text()
                raise RuntimeError(f"{self.name}: {name} exited with {proc.returncode}: {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: {name} not ready within {limit} s")
            time.sleep(0.01)

    def client_keys(self) -> ClientKeys:
        return ClientKeys.load(self.keys_dir)

    def sysctl(self, key: str) -> str:
        return netns.sysctl(self.netns, key) or ""

    def partition(self) -> None:
        """Drop every packet on the host's link, both ways (nftables in its namespace): the
        coordinator and the bridge each see the other go silent, as a cut cable would show."""
        dev = self._veth[1]
        rules = (
            "table inet xtune_partition {\n"
            f'  chain in {{ type filter hook input priority 0; iifname "{dev}" drop; }}\n'
            f'  chain out {{ type filter hook output priority 0; oifname "{dev}" drop; }}\n'
            "}\n"
        )
        subprocess.run(
            ["ip", "netns", "exec", self.netns, "nft", "-f", "-"], input=rules.encode(), check=True
        )

    def heal(self) -> None:
        """Let the host's traffic through again."""
        nft = ["nft", "delete", "table", "inet", "xtune_partition"]
        subprocess.run(["ip", "netns", "exec", self.netns, *nft], check=True)

    def kill(self) -> None:
        """SIGKILL the bridge and xrtd: the host is gone mid-trial."""
        for name, proc in (("xrtd-bridge", self.bridge_proc), ("xrtd", self.xrtd)):
            if proc is not None and proc.poll() is None:
                self._signal(name, proc, signal.SIGKILL)
                proc.wait()

    def close(self) -> None:
        daemons = (("xobserve", self.observer), ("xrtd-bridge", self.bridge_proc), ("xrtd", self.xrtd))
        for name, proc in daemons:
            if proc is not None and proc.poll() is None:
                self._signal(name, proc, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self._signal(name, proc, signal.SIGKILL)
                    proc.wait()
            if self.image is not None and proc is not None:  # in case `podman run` itself was killed
                podman("rm", "--force", "--time", "10", self.container(name), check=False)
        subprocess.run(["ip", "netns", "del", self.netns], check=False, capture_output=True)
        for shm in (self.shm, self._signals_shm):
            if os.path.exists(f"/dev/shm/{shm}"):
                os.unlink(f"/dev/shm/{shm}")


_FLEETS = itertools.count()
_SUBNET_BASE = int.from_bytes(os.urandom(1))  # fleets of two test processes rarely share a subnet


class SimulatedFleet:
    """N simulated hosts and the hosts file that names them (`hosts.yaml` in `root`); `images` maps
    a host's name (h1, h2, ...) to the agent image its daemons run from (the others: build/bin)."""

    def __init__(self, root: Path, count: int, images: dict[str, str] | None = None) -> None:
        # Numbered per process, not drawn at random: a fleet's veths outlive its namespaces for a
        # moment (the kernel destroys them asynchronously), so the next fleet must not reuse names.
        n = next(_FLEETS)
        tag = f"{os.getpid() % 10000}{n % 100:02d}"
        subnet = 100 + (_SUBNET_BASE + n) % 100
        self.root = root
        images = images or {}
        self.hosts = [SimulatedHost(root, i + 1, subnet, tag, images.get(f"h{i + 1}")) for i in range(count)]
        self.hosts_file = root / "hosts.yaml"
        self._previous: dict[int, Any] = {}  # signal handlers in place before the fleet's

    def __enter__(self) -> SimulatedFleet:
        self._on_signals()
        try:
            for host in self.hosts:
                host.create()
        except BaseException:
            self.close()
            raise
        doc = {
            "hosts": [
                {"name": h.name, "bridge": h.bridge, "keys": str(h.keys_dir), "netns": h.netns}
                for h in self.hosts
            ]
        }
        self.hosts_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        for host in self.hosts:
            host.close()
        for signum, previous in self._previous.items():
            with contextlib.suppress(ValueError):  # not the main thread: nothing was installed
                signal.signal(signum, previous)
        self._previous = {}

    def _on_signals(self) -> None:
        """An owner ended by SIGTERM or SIGINT closes the fleet first (namespaces and daemons
        outlive it otherwise), then dies of the signal as it would have."""
        if threading.current_thread() is not threading.main_thread():
            return

        def closing(signum: int, frame: FrameType | None) -> None:
            previous = self._previous.get(signum, signal.SIG_DFL)
            self.close()
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.signal(signum, closing)


def _accepts(path: str) -> bool:
    """A unix socket at `path` accepts connections."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(path)
        except OSError:
            return False
    return True

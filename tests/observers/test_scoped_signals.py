"""Signals scoped to one workload: tcp by network namespace and by port, the sched family's target
by cgroup. Other activity on the host (the other half of each test's traffic, anything else
running here) must not enter them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from xtune.host.services import free_port
from xtune.signals.frames import ShmFrameReader
from xtune.testing.observe import frames_while, total

CONNECT = """
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
server = socket.create_server(("127.0.0.1", port), backlog=n)
for _ in range(n):
    c = socket.create_connection(("127.0.0.1", port))
    s, _ = server.accept()
    c.sendall(b"x")
    s.recv(1)
    c.close()
    s.close()
server.close()
"""


def connections(port: int, n: int, netns: str | None = None) -> None:
    """n TCP connections to 127.0.0.1:port, each with one byte sent (in `netns` when given)."""
    cmd = [sys.executable, "-c", CONNECT, str(port), str(n)]
    subprocess.run(["ip", "netns", "exec", netns, *cmd] if netns else cmd, check=True, timeout=60)


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"xt-scope-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


def test_tcp_signals_of_one_network_namespace(start_observer, netns):
    obs = start_observer("--families", "tcp", "--window-ms", "50", "--netns", netns)

    def traffic() -> None:
        connections(free_port(), 5, netns)
        connections(free_port(), 7)  # the host's: left out

    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(reader, traffic)
        assert reader.catalog is not None
        sources = {s.source for s in reader.catalog.signals if s.name == "tcp.established"}
    assert total(frames, "tcp.established") == 2 * 5, "both ends of the namespace's connections only"
    assert total(frames, "tcp.rtt_samples") > 0
    ino = os.stat(f"/run/netns/{netns}").st_ino
    assert sources == {f"raw_tp:inet_sock_set_state netns={ino}"}, "the catalog says what is left out"


def test_tcp_signals_of_one_port(start_observer):
    port, other = free_port(), free_port()
    obs = start_observer("--families", "tcp", "--window-ms", "50", "--port", str(port))

    def traffic() -> None:
        connections(port, 4)
        connections(other, 6)

    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(reader, traffic)
    # The client's end has the port as its remote port, the accepted end as its local one.
    assert total(frames, "tcp.established") == 2 * 4


def cgroup2_root() -> Path:
    for line in Path("/proc/mounts").read_text().splitlines():
        dev, where, kind = line.split()[:3]
        if kind == "cgroup2":
            return Path(where)
    pytest.fail("no cgroup v2 hierarchy is mounted")


def test_sched_target_is_a_cgroup(start_observer, uprobe_target):
    """Four spinners on one CPU in a cgroup of their own: the target signals are their run-queue
    waits, as the kernel counts them, and a sibling cgroup with no task sees none."""
    root = cgroup2_root()
    tag = f"xt-scope-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    busy, idle = root / f"{tag}-busy", root / f"{tag}-idle"
    busy.mkdir()
    idle.mkdir()
    try:
        inside = start_observer("--families", "sched", "--window-ms", "100", "--cgroup", str(busy))
        empty = start_observer("--families", "sched", "--window-ms", "100", "--cgroup", str(idle))
        cpu = sorted(os.sched_getaffinity(0))[-1]
        waited: list[int] = []

        def contend() -> None:
            spin = [str(uprobe_target), "spin", "1000", str(cpu)]

            def join() -> None:
                (busy / "cgroup.procs").write_text("0")

            spinners = [
                subprocess.Popen(spin, stdout=subprocess.PIPE, text=True, preexec_fn=join) for _ in range(4)
            ]
            try:
                for p in spinners:
                    assert p.stdout is not None and p.stdout.readline() == "spun\n"
                waited.extend(int(Path(f"/proc/{p.pid}/schedstat").read_text().split()[1]) for p in spinners)
            finally:
                for p in spinners:
                    p.kill()
                    p.wait()

        with ShmFrameReader(inside.shm) as a, ShmFrameReader(empty.shm) as b:
            assert b.poll(10) is not None
            frames = frames_while(a, contend)
            others = []  # the empty cgroup's frames over the same time
            while (f := b.poll(1)) is not None and f.window_start_ns < frames[-1].window_end_ns:
                others.append(f)
        assert others and others[0].window_start_ns <= frames[0].window_end_ns
        ours = total(frames, "sched.target.runq_wait") * 1e3
        assert 0.95 * sum(waited) - 5e6 <= ours <= 1.05 * sum(waited) + 5e6, (ours, waited)
        assert total(others, "sched.target.runq_wait") == 0
    finally:
        for d in (busy, idle):
            deadline = time.monotonic() + 10
            while d.exists():
                try:
                    d.rmdir()
                except OSError:
                    assert time.monotonic() < deadline, f"{d} still has tasks"
                    time.sleep(0.05)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--netns", "/run"], "is not a network namespace"),
        (["--netns", "no-such-namespace"], "/run/netns/no-such-namespace"),
        (["--families", "sched", "--port", "80"], "filter the tcp family, which is not selected"),
        (["--families", "tcp", "--cgroup", "CGROUP2"], "which is not selected"),
        (["--cgroup", "/tmp"], "is not a cgroup v2 directory"),
    ],
)
def test_scopes_that_would_change_nothing_are_refused(xobserve, args, words):
    args = [str(cgroup2_root()) if a == "CGROUP2" else a for a in args]
    r = subprocess.run([str(xobserve), *args, "--once"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and words in r.stderr, r.stderr

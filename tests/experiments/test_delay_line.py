"""The network case's delay line (experiments/cases/delay.c, build/bin/xtune-delay) on the shaped
path: every datagram sent either way arrives, in the order sent, and none earlier than the path's
one-way delay (a lower bound: a loaded host only makes packets later); the program's own counts
agree (nothing dropped); it refuses bad options by name; and it dies with the process that started
it, even one killed by SIGKILL, so no run leaves it holding a namespace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from cases.shaped import RTT_MS, ShapedPath
from xtune import paths

COUNT = 400
BURST = 50  # sent back to back, so many packets wait in the delay's FIFO at once
PORT = 40100

RECEIVE = """
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 1 << 22)  # SO_RCVBUFFORCE (root): no datagram lost here
s.bind((sys.argv[1], int(sys.argv[2])))
print("bound", flush=True)
s.settimeout(5)
got = []
try:
    while len(got) < int(sys.argv[3]):
        data = s.recv(2048)
        got.append((time.monotonic_ns(), *json.loads(data[:64].decode().rstrip())))
except socket.timeout:
    pass
print(json.dumps(got))
"""

SEND = """
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
to = (sys.argv[1], int(sys.argv[2]))
for i in range(int(sys.argv[3])):
    s.sendto(json.dumps([i, time.monotonic_ns()]).ljust(64).encode() + bytes(136), to)
    if i % int(sys.argv[4]) == int(sys.argv[4]) - 1:
        time.sleep(0.002)
"""


def send_through(path: ShapedPath, src: str, dst: str, dst_addr: str) -> list[tuple[int, int, int]]:
    """COUNT datagrams from `src` to `dst`: (received at, sequence number, sent at) per arrival."""
    recv = subprocess.Popen(["ip", "netns", "exec", dst, sys.executable, "-c", RECEIVE, dst_addr, str(PORT),
                             str(COUNT)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert recv.stdout is not None and recv.stdout.readline().strip() == "bound"
    subprocess.run(["ip", "netns", "exec", src, sys.executable, "-c", SEND, dst_addr, str(PORT), str(COUNT),
                    str(BURST)], check=True)  # fmt: skip
    out, _ = recv.communicate(timeout=30)
    return [tuple(x) for x in json.loads(out)]


def test_every_packet_arrives_in_order_and_no_earlier_than_the_delay() -> None:
    one_way_ns = RTT_MS * 1_000_000 // 2
    with ShapedPath() as path:
        for src, dst, addr in ((path.server, path.client, path.client_addr),
                               (path.client, path.server, path.server_addr)):  # fmt: skip
            got = send_through(path, src, dst, addr)
            assert [seq for _, seq, _ in got] == list(range(COUNT)), f"{src} -> {dst}: lost or reordered"
            early = [(seq, arrived - sent) for arrived, seq, sent in got if arrived - sent < one_way_ns]
            assert not early, f"{src} -> {dst}: earlier than {one_way_ns} ns: {early[:5]}"
    counts = path.delay_counts
    assert counts is not None
    assert counts["forwarded"] >= 2 * COUNT, counts
    assert counts["dropped_full"] == counts["dropped_oversize"] == counts["write_errors"] == 0, counts
    assert counts["max_queued"] > 1, counts  # the bursts did queue in the FIFO


@pytest.mark.parametrize(
    "args, named",
    [
        (["--dev", "x"], "--delay-us is required"),
        (["--dev", "x", "--delay-us", "-1"], "--delay-us"),
        (["--dev", "x", "--delay-us", "10ms"], "--delay-us"),
        (["--delay-us", "10"], "--dev"),
        (["--dev", "x", "--delay-us", "10", "--queue-packets", "0"], "--queue-packets"),
        (["--dev", "x", "--delay-us"], "takes a value"),
        (["--dev", "x", "--delay-us", "10", "--parent", "0"], "--parent"),
    ],
)
def test_bad_options_are_refused_by_name(args: list[str], named: str) -> None:
    out = subprocess.run([str(paths.binary("xtune-delay")), *args], capture_output=True, text=True)
    assert out.returncode == 2 and named in out.stderr, out.stderr


def running(pid: int) -> bool:
    """The process exists and has not exited (a zombie waits only to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return not f.read().rsplit(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return False


def test_dies_with_its_parent_even_on_sigkill(netns: str) -> None:
    parent_code = (
        "import os, subprocess, sys;"
        " p = subprocess.Popen(sys.argv[1:] + [str(os.getpid())], stdout=subprocess.DEVNULL);"
        " print(p.pid, flush=True); p.wait()"
    )
    delay = str(paths.binary("xtune-delay"))
    cmd = ["ip", "netns", "exec", netns, delay, "--dev", "xtdkill", "--delay-us", "1", "--parent"]
    parent = subprocess.Popen([sys.executable, "-c", parent_code, *cmd], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 20  # a wait for the exit, not a claim about how fast it is
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(child), "xtune-delay outlived the process that started it"

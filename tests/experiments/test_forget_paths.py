"""Before each run of a case, TCP's metrics cache is emptied in the case's namespaces
(experiments/cases/interleave.py): a closed connection leaves its RTT and window for the next one
to the same address, which would carry one contender's run into the next one's."""

from __future__ import annotations

import subprocess
import sys

from cases.interleave import forget_paths
from xtune.host.netns import VethPair

SERVE = (
    "import socket; s = socket.create_server(('0.0.0.0', 5301)); print(flush=True); c = s.accept()[0]\n"
    "while c.recv(65536): pass\n"
    "c.close()"
)
CONNECT = (
    "import socket, sys; c = socket.create_connection((sys.argv[1], 5301)); c.sendall(b'x' * 100000); "
    "c.close()"
)


def cached(ns: str) -> str:
    return subprocess.run(
        ["ip", "-n", ns, "tcp_metrics", "show"], capture_output=True, text=True, check=True
    ).stdout


def test_a_closed_connections_metrics_are_gone_after_forget_paths() -> None:
    with VethPair() as pair:
        server = subprocess.Popen(
            ["ip", "netns", "exec", pair.server, sys.executable, "-c", SERVE],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None and server.stdout.readline() == "\n"
            connect = ["ip", "netns", "exec", pair.client, sys.executable, "-c", CONNECT, pair.server_addr]
            subprocess.run(connect, check=True, timeout=30)
            server.wait(timeout=30)
        finally:
            server.kill()
        assert pair.server_addr in cached(pair.client) or pair.client_addr in cached(pair.server)
        forget_paths(pair.created)
        assert cached(pair.client) == "" and cached(pair.server) == ""

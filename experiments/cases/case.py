"""What a case study is: a server, its benchmark (the BO SLO file's), the contenders' files."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from xtune.host.netns import VethPair

HERE = Path(__file__).resolve().parent
SLO_DIR = HERE.parent / "slo"
TUNED_PROFILES = ("throughput-performance", "latency-performance", "network-throughput", "network-latency")


@dataclass(frozen=True)
class Case:
    name: str
    server: str  # servers.SERVERS key
    port: int
    bo_file: Path  # objective, SLO lines, benchmark and the knobs xtune tunes
    paper_file: Path  # the paper's profile for this class of server
    p99: str  # the benchmark metric reported as p99 latency (ms)
    load: Callable[[bool], dict[str, str]]  # quick -> the load's variables (duration, requests)

    def variables(self, pair: VethPair, serve_dir: Path, quick: bool) -> dict[str, str]:
        return {
            "SERVER_NETNS": f"/run/netns/{pair.server}",
            "SERVER_NETNS_NAME": pair.server,
            "CLIENT_NETNS": pair.client,
            "SERVER_ADDR": pair.server_addr,
            "SERVE_DIR": str(serve_dir),
            "CASES": str(HERE),
            "PYTHON": sys.executable,  # the servers import the package (xtune.testing.postgres)
            **self.load(quick),
        }

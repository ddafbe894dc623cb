"""What a case study is: a server and its benchmark, or a benchmark on a device (the BO SLO file's),
the contenders' files, and where it runs (a veth pair's namespaces, or a loop device)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from xtune.host.netns import VethPair

from cases.loopdev import LoopDevice
from cases.perf_const import PerfConst
from cases.shaped import ShapedPath

HERE = Path(__file__).resolve().parent
SLO_DIR = HERE.parent / "slo"
TUNED_PROFILES = ("throughput-performance", "latency-performance", "network-throughput", "network-latency")


@dataclass(frozen=True)
class Place:
    """Where one run of a case happens: the SLO files' variables, the server's namespace (net.*
    sysctls apply there; None: the host) and the block device whose queue the contenders set."""

    variables: dict[str, str]
    netns: str | None = None
    device: str | None = None
    namespaces: tuple[str, ...] = ()  # every namespace of the case's path (its TCP caches)


@dataclass(frozen=True)
class Case:
    name: str
    bo_file: Path  # objective, SLO lines, benchmark and the knobs xtune tunes
    paper_file: Path  # the paper's profile for this class of server
    p99: str  # the benchmark metric reported as p99 latency (ms)
    load: Callable[[bool], dict[str, str]]  # quick -> the load's variables (duration, requests)
    server: str | None = None  # servers.SERVERS key; None: the benchmark runs on a loop device
    port: int = 0
    tuned_profiles: tuple[str, ...] = TUNED_PROFILES
    # The sysctl prefixes a contender may set here (None: all); the others are listed as not applied.
    reach: tuple[str, ...] | None = None
    # Only the sysctls the server's namespace holds; the host-wide ones are listed as not applied.
    namespace_only: bool = False
    topology: Callable[[], VethPair | ShapedPath] = VethPair  # the server cases' namespaces
    # A compiled-in constant of the server retuned live through SIE: the case runs the binary its
    # scope table was made for, and its BO SLO file names the running server (SERVER_PID, PLAN).
    perf_const: PerfConst | None = None
    # BO trials: four Sobol points and eight guided ones. With four guided trials BO found the
    # network case's narrow band of useful send caps in one full run of two.
    budget: int = 12

    def variables(self, pair: VethPair | ShapedPath, serve_dir: Path, quick: bool) -> dict[str, str]:
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

    @contextlib.contextmanager
    def place(self, work: Path, quick: bool) -> Iterator[Place]:
        """The case's fresh namespaces (server cases) or loop device (backing file in `work`), gone
        on exit."""
        if self.server is None:
            with LoopDevice(work) as loop:
                common = {"CASES": str(HERE), "PYTHON": sys.executable}
                yield Place({"DEVICE": loop.name, **common, **self.load(quick)}, device=loop.name)
        else:
            with self.topology() as pair:
                variables = self.variables(pair, work / "serve", quick)
                yield Place(variables, netns=pair.server, namespaces=tuple(pair.created))

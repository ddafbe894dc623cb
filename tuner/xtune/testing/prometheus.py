"""A real Prometheus server for tests, and a fleet run whose every trial it has scraped.

`PrometheusServer`: Debian's `prometheus` on a free port of 127.0.0.1 with a temporary TSDB,
scraping every second (job `xtune`) the targets of the file-SD files `*.json` in a directory.

`ScrapedRun`: `run_fleet` over a `SimulatedFleet`, each host its own exporter listed in the
server's directory. In each trial's measurement it reads the host's knobs in the host's own
namespace and waits until Prometheus holds those values under the host's `host` label: what
Prometheus says per host is thus checked against each host's own state, and a run ends only
after every trial's values were scraped (no timing assumption).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from xtune.config import load_hosts
from xtune.config.schema import SloFile
from xtune.host.netns import Setup
from xtune.host.services import free_port
from xtune.hosts.coordinator import FleetResult, run_fleet
from xtune.hosts.exporters import HostExporters
from xtune.testing.fleet import SimulatedFleet
from xtune.trials.store import Store

Results = list[dict[str, Any]]


class PrometheusServer(Setup):
    def __init__(self, root: Path, sd_dir: Path) -> None:
        self.root = root
        self.sd_dir = sd_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> PrometheusServer:
        """`with` without a block: started and ready to answer queries, or stopped again and a
        RuntimeError with its log."""
        return self.__enter__()

    def _create(self) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError(
                "prometheus is not installed (scripts/apt-packages.txt lists it): run `make setup`"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        self.sd_dir.mkdir(parents=True, exist_ok=True)  # watched from the start
        config = self.root / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n  - job_name: xtune\n"
            f"    file_sd_configs: [{{files: ['{self.sd_dir}/*.json'], refresh_interval: 1s}}]\n"
        )
        log = self.root / "prometheus.log"
        with open(log, "ab") as out:
            self._proc = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={self.root / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=out, stderr=out,
            )  # fmt: skip
        self._until_ready(log)

    def _until_ready(self, log: Path) -> None:
        deadline = time.monotonic() + 60
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited with {self._proc.returncode}: {log.read_text()[-2000:]}"
                )
            try:
                if requests.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus not ready within 60 s: {log.read_text()[-2000:]}")
            time.sleep(0.2)

    def query(self, expr: str) -> Results:
        """An instant query's result (`/api/v1/query`)."""
        r = requests.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=5)
        r.raise_for_status()
        result: Results = r.json()["data"]["result"]
        return result

    def until(self, what: str, expr: str, check: Callable[[Results], bool], timeout: float = 30) -> Results:
        """The result of `expr` once `check` holds for it; AssertionError naming `what` and the last
        result if it does not within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if check(result):
                return result
            assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}; {expr} gives {result}"
            time.sleep(0.2)

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


def knob_values(result: Results) -> dict[str, float]:
    """`{knob: value}` of an instant query's result."""
    return {s["metric"]["knob"]: float(s["value"][1]) for s in result}


class ScrapedRun:
    def __init__(
        self, prometheus: PrometheusServer, fleet: SimulatedFleet, slo: SloFile, store: Store
    ) -> None:
        self.prometheus = prometheus
        self.fleet = fleet
        self.slo = slo
        self.store = store
        self.applied: dict[str, dict[str, float]] = {}  # host -> knob -> value at its last trial
        self.series: dict[str, Results] = {}  # host -> Prometheus' knob_applied series then
        self.listed_at_end: Any = None  # the file-SD file as `run_fleet` left it
        self.file: Path | None = None

    def run(self) -> FleetResult:
        """The run, each host its own exporter (127.0.0.1) listed in the server's file-SD directory."""
        with HostExporters(self.slo.name, "127.0.0.1", self.prometheus.sd_dir) as exporters:
            self.file = exporters.file
            hosts = load_hosts(self.fleet.hosts_file)
            result = run_fleet(self.slo, hosts, self.store, exporters, self._progress)
            self.listed_at_end = json.loads(exporters.file.read_text())
        return result

    def _progress(self, host: str, event: str, data: dict[str, Any]) -> None:
        if event != "window" or data["phase"] != "measure":
            return
        h = next(h for h in self.fleet.hosts if h.name == host)
        values = {k.name: float(h.sysctl(k.target)) for k in self.slo.knobs}  # sysctl names
        self.series[host] = self.prometheus.until(
            f"{host}'s knobs {values} in Prometheus",
            f'xtune_knob_applied{{host="{host}"}}',
            lambda result: knob_values(result) == values,
        )
        self.applied[host] = values

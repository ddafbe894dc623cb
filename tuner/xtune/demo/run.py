"""`xtune demo`: a real tuning job on an embedded workload, end to end, on this host.

It builds the network of `bottleneck.py` (three namespaces, 100 Mbit/s token bucket with a deep
queue), starts private xobserve (tcp + func families; the func family uprobes the workload's
receiver so throughput is an observer signal) and xrtd instances, and tunes the per-namespace
tcp_rmem / tcp_wmem maxima with BO from `demo/data/bufferbloat.yaml`: minimize the p99
smoothed RTT while keeping at least 95 % of the baseline throughput. It prints the before/after
table and writes the report; the knobs are restored and everything is torn down on exit.

Then the second phase (`sie_phase.py`): a compiled-in constant of an unmodified running binary
(the dataplane server's RX_BATCH_SIZE) tuned through SIE, with its own table and report. And the
third (`adaptive_phase.py`): the adaptive loop on the same server, a tree trained from a short
sweep deciding RX_BATCH_SIZE at 1 ms windows on a shifting load, against the compiled value.
`figures.demo_figures` gives every table's figures as data (`xtune demo --json FILE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from xtune import paths
from xtune.config import load
from xtune.config.schema import SloFile
from xtune.demo.adaptive_phase import AdaptivePhase, run_adaptive_phase
from xtune.demo.bottleneck import Bottleneck
from xtune.demo.sie_phase import SiePhase, run_sie_phase
from xtune.host.services import Services, free_port
from xtune.trials.store import Store
from xtune.tuning.console import RunUnits
from xtune.tuning.job import run_job
from xtune.tuning.loop import RunResult
from xtune.tuning.metrics import Metrics

TEMPLATE = paths.package_data("demo", "data", "bufferbloat.yaml")


@dataclass
class DemoRun:
    result: RunResult
    units: RunUnits  # of the objective and SLO lines, resolved from the observer's catalog
    report: Path
    store_url: str
    metrics_port: int
    sie: SiePhase
    adaptive: AdaptivePhase


def demo_slo(net: Bottleneck, budget: int, short: bool) -> SloFile:
    variables = {
        "RECEIVER_NETNS": net.path(net.receiver),
        "SENDER_NETNS": net.path(net.sender),
        "RECEIVER_ADDR": net.receiver_addr,
        "BULK": str(paths.binary("xtune-bulk")),
        "BUDGET": str(budget),
    }
    slo = load(TEMPLATE, variables)
    if short:
        policy = slo.policy.model_copy(update={"init_trials": 2, "baseline_windows": 4})
        slo = slo.model_copy(update={"policy": policy})
    return slo


def run_demo(
    out_dir: str | Path,
    short: bool = False,
    budget: int | None = None,
    metrics_port: int | None = None,
    console: Console | None = None,
) -> DemoRun:
    console = console or Console()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    db = out / "trials.db"
    db.unlink(missing_ok=True)
    store = Store(f"sqlite:///{db}")
    budget = budget or (4 if short else 14)
    bulk = paths.binary("xtune-bulk")
    with Bottleneck() as net, Services(["tcp", "func"], funcs=[f"{bulk}:bulk_chunk"]) as svc:
        slo = demo_slo(net, budget, short)
        console.print(
            f"[bold]xtune demo[/]: bulk TCP {net.sender} -> {net.receiver} through a {net.rate_mbit} Mbit/s "
            f"bottleneck; tuning {', '.join(k.target for k in slo.knobs)} with {slo.policy.kind} "
            f"(budget {slo.policy.budget})"
        )
        metrics = Metrics(slo.name)
        port = metrics.serve(port=metrics_port if metrics_port is not None else free_port())
        console.print(f"Prometheus metrics on http://127.0.0.1:{port}/metrics")
        job = run_job(slo, store, metrics, console, svc.xrtd_socket, svc.signals_shm)
    job.print_table(console)
    report = job.write_report(out / "report", console)
    sie = run_sie_phase(out, store, short, None, console)
    adaptive = run_adaptive_phase(out, short, console)
    return DemoRun(job.result, job.units, report, store.url, port, sie, adaptive)

"""`xtune demo`, second phase: a compiled-in constant of a running, unmodified binary, tuned
through SIE.

The dataplane server of `experiments/dataplane` (RX_BATCH_SIZE = 64 compiled in) runs under an
open-loop Poisson load. `xtune analyze` of its spec gives the scope table; a plan made from it is
registered in the demo's private xrtd as the `sie-user` knob `<pid>:<plan>`, so every trial is an
xrtd transaction that arms / retunes the spans in the live process. The objective is an observer
signal: xobserve's func family uprobes `serve_batch()` (a batch's first request, pickup to
reply); its SLO line keeps the served requests per second (uprobed `dp_round()`) at 95 % of the
baseline. The same Runner and policies as the first phase do the tuning. On exit the knob is
restored (xrtd disarms: original bytes), and the demo checks the process text byte by byte.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from xtune import paths
from xtune.config import load
from xtune.config.schema import SloFile
from xtune.config.units import format_value
from xtune.demo.dataplane_load import loadgen
from xtune.host.services import Services, free_port
from xtune.knobs.table import KnobClient
from xtune.sie import attach as eng
from xtune.sie.analyze import analyze
from xtune.sie.scope import ScopeTable
from xtune.sie.spec import load_spec
from xtune.trials.store import Store
from xtune.tuning.console import RunUnits
from xtune.tuning.job import run_job
from xtune.tuning.loop import RunResult
from xtune.tuning.metrics import Metrics
from xtune.tuning.terminal import is_ascii

TEMPLATE = paths.package_data("demo", "data", "dataplane.yaml")
# The analyzed server is C source of the checkout (experiments/dataplane/); $XTUNE_DATAPLANE_SPEC names it
# for an installed package.
SPEC_PATH = ("experiments/dataplane/rx_batch.toml", "XTUNE_DATAPLANE_SPEC")
CONST = "RX_BATCH_SIZE"
LIGHT_LOAD = "3000:4"  # requests per second:flows, the load of demo/data/dataplane.yaml
PROBE = "serve_batch"
# dp_round(active_flows, backlog, oldest_age_us, taken): `taken` per round times rounds per second is
# the served request rate, which the SLO line of demo/data/dataplane.yaml bounds.
SERVED = "dp_round:arg3/32=taken"
KNOB = "rx_batch_size"


def dataplane_spec() -> Path:
    """The analyze spec of the demo's dataplane server."""
    return paths.checkout_file(*SPEC_PATH)


@dataclass
class SiePhase:
    result: RunResult
    units: RunUnits
    report: Path
    text_restored: bool
    # (RX_BATCH_SIZE, the load generator's p50 latency): the compiled value, then the chosen one
    client_p50_us: list[tuple[int, float]]


class Server:
    """The analyzed server binary on a free UDP port, until closed."""

    def __init__(self, binary: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([str(binary), str(self.port)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError(f"dataplane server {binary} did not start")

    def load_p50_us(self, seconds: int) -> float:
        """The load generator's own p50 request latency (send to reply) over one light phase."""
        return float(loadgen(self.port, [f"{seconds}:{LIGHT_LOAD}"])["p50_us"])

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def client_check(
    server: Server, table: ScopeTable, plan: Path, chosen: int | None, seconds: int
) -> list[tuple[int, float]]:
    """Latency seen by the client, independent of the observer: compiled value, then the chosen
    one (when the run kept one), set through a private xrtd of its own (the tuning's is gone by
    now; closing it restores)."""
    const = table.const(CONST)
    p50 = [(int(const.values[0]), server.load_p50_us(seconds))]
    if chosen is None:
        return p50
    with Services([], observe=False) as svc, KnobClient(svc.xrtd_socket) as c:
        c.register(KNOB, "sie-user", f"{server.proc.pid}:{plan}", min=const.min_value, max=const.max_value)
        c.set(KNOB, chosen, reason="client-side check of the chosen value")
        p50.append((chosen, server.load_p50_us(seconds)))
    return p50


def sie_slo(pid: int, plan: Path, port: int, budget: int, short: bool) -> SloFile:
    variables = {
        "SERVER_PID": str(pid),
        "PLAN": str(plan),
        "PORT": str(port),
        "LOADGEN": str(paths.binary("dataplane-loadgen")),
        "POLICY": "grid" if short else "bo",
        "BUDGET": str(budget),
    }
    return load(TEMPLATE, variables)


def run_sie_phase(out: Path, store: Store, short: bool, budget: int | None, console: Console) -> SiePhase:
    table = analyze(load_spec(dataplane_spec()))
    const = table.const(CONST)
    if not const.tunable:
        raise RuntimeError(f"{CONST} is not tunable: {'; '.join(r.reason for r in const.refusals)}")
    binary = Path(table.binary.path)
    budget = budget or (3 if short else 6)
    with tempfile.TemporaryDirectory(prefix="xtune-demo-sie-") as tmp:
        plan = Path(tmp) / "rx_batch.plan"
        plan.write_text(eng.plan_text(table, [CONST]))
        server = Server(binary)
        try:
            funcs = [f"{binary}:{PROBE}", f"{binary}:{SERVED}"]
            with Services(["func"], funcs=funcs, pid=server.proc.pid) as svc:
                slo = sie_slo(server.proc.pid, plan, server.port, budget, short)
                console.print(
                    f"\n[bold]xtune demo, SIE phase[/]: dataplane server pid {server.proc.pid} "
                    f"(unmodified, {CONST} compiled in; {len(const.spans)} spans in the scope table) "
                    f"under Poisson load; tuning {CONST} through xrtd's sie-user backend with "
                    f"{slo.policy.kind} (budget {slo.policy.budget})"
                )
                job = run_job(slo, store, Metrics(slo.name), console, svc.xrtd_socket, svc.signals_shm)
                result = job.result
            restored = eng.spans_hold_original(server.proc.pid, table)
            chosen = int(result.best[KNOB]) if result.best else None
            p50 = client_check(server, table, plan, chosen, 2 if short else 3)
            restored = restored and eng.spans_hold_original(server.proc.pid, table)
        finally:
            server.close()
    job.print_table(console)
    console.print(
        f"{CONST} restored on exit: process text "
        + ("byte-exact (original)" if restored else "[red]NOT original[/]")
    )
    console.print(
        "client-measured p50 latency (load generator, send to reply): "
        + ", ".join(f"{CONST} {v}: {format_value(us, 'us', is_ascii(console))}" for v, us in p50)
    )
    report = job.write_report(out / "report-sie", console)
    return SiePhase(result, job.units, report, restored, p50)

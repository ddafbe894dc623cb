"""`xtune run FILE --hosts HOSTS [--resume RUN]`: the coordinator's run and what it prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from xtune.config import HostsFile, SloFile
from xtune.hosts.coordinator import FleetError, run_fleet
from xtune.hosts.exporters import HostExporters
from xtune.trials.store import Store


def host_exporters(slo: SloFile, metrics_addr: str, sd_dir: Path) -> HostExporters:
    """Each host's exporter will take a free port of `metrics_addr`'s address (its port serves a
    run on one host only), listed for Prometheus in `sd_dir`; exit 2 saying why they cannot."""
    addr = metrics_addr.rpartition(":")[0].strip("[]") or "127.0.0.1"
    try:
        return HostExporters(slo.name, addr, sd_dir)
    except ValueError as e:
        typer.echo(f"xtune run: {e}", err=True)
        raise typer.Exit(2) from e


def run_on_hosts(
    slo: SloFile,
    hosts: HostsFile,
    store: Store,
    exporters: HostExporters,
    console: Console,
    resume: int | None = None,
) -> None:
    """The run, and its table; the exporters are closed (the file-SD file removed) when it ends."""

    def progress(host: str, event: str, data: dict[str, Any]) -> None:
        if event == "trial":
            console.print(f"{host}: trial {data['index']} {data['params']}", highlight=False)
        elif event == "failed":
            console.print(f"[red]{host}: failed: {data['reason']}[/]", highlight=False)

    console.print(
        f"Prometheus targets (file SD, one exporter per host on {exporters.addr}): {exporters.file}",
        highlight=False,
        soft_wrap=True,
    )
    with exporters:
        try:
            result = run_fleet(slo, hosts, store, exporters, progress, resume)
        except FleetError as e:
            typer.echo(f"xtune run: {e}", err=True)
            raise typer.Exit(1) from e
    table = Table(title=f"run {result.experiment_id}: {slo.name} on {len(hosts.hosts)} hosts")
    for col in ("host", "trials", "state"):
        table.add_column(col)
    for run in result.hosts:
        table.add_row(run.host.name, str(len(run.trials)), run.error or "ok")
    console.print(table)
    if resume is not None:
        console.print(f"resumed run {resume}: {result.attached} stored trials given to the policy as data")
    n, seconds = len(result.trials), result.seconds
    console.print(f"{n} trials in {seconds:.1f} s ({n * 3600 / seconds:.0f} per hour)")
    console.print(f"best: {result.best}" if result.best else "best: none met the SLO", highlight=False)

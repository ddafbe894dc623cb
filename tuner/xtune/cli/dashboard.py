"""`xtune dashboard`: serve the live page over the trial store, xrtd and optionally Prometheus."""

from __future__ import annotations

from typing import Annotated

import typer

from xtune import paths
from xtune.cli.tune import DEFAULT_DB, DbOption, open_store

app = typer.Typer()

DEFAULT_ADDR = "127.0.0.1:9465"


@app.command()
def dashboard(
    db: DbOption = DEFAULT_DB,
    addr: Annotated[str, typer.Option(help="HOST:PORT to serve on (port 0: a free one).")] = DEFAULT_ADDR,
    xrtd_socket: Annotated[
        str, typer.Option(help="xrtd's control socket (knob states).")
    ] = paths.XRTD_SOCKET,
    prometheus: Annotated[
        str, typer.Option(help="Prometheus server URL for the exporter's series, e.g. http://127.0.0.1:9090.")
    ] = "",
    prometheus_range: Annotated[float, typer.Option(help="Seconds of Prometheus history to draw.")] = 900.0,
) -> None:
    """Serve a live page: trials, the best so far, SLO margins, knobs, signals, rollbacks."""
    from xtune.dashboard.server import DashboardServer
    from xtune.dashboard.state import Sources

    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        typer.echo(f"error: --addr {addr!r}: want HOST:PORT", err=True)
        raise typer.Exit(2)
    sources = Sources(open_store(db), xrtd_socket, prometheus, prometheus_range)
    try:
        server = DashboardServer(sources, host, int(port))
    except OSError as exc:
        typer.echo(f"error: cannot serve on {addr}: {exc.strerror}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"xtune dashboard on {server.url} (store {db})", err=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()

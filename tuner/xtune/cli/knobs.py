"""`xtune knobs ...`: register, inspect and change knobs of a running xrtd."""

from __future__ import annotations

import json
from typing import Annotated, Any, NoReturn

import typer

from xtune import paths
from xtune.knobs.table import KnobClient, KnobError

app = typer.Typer(name="knobs", no_args_is_help=True, help="Knobs held by xrtd (the runtime daemon).")

_socket: dict[str, str] = {"path": paths.XRTD_SOCKET}


@app.callback()
def _options(
    socket: Annotated[str, typer.Option("--socket", help="xrtd's control socket")] = paths.XRTD_SOCKET,
) -> None:
    _socket["path"] = socket


def _client() -> KnobClient:
    try:
        return KnobClient(_socket["path"])
    except KnobError as exc:
        _fail(exc)


def _fail(exc: Exception) -> NoReturn:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(1)


def _line(k: dict[str, Any]) -> str:
    where = f" netns={k['netns']}" if k.get("netns") else ""
    if k["type"] == "enum":
        bounds = "{" + ",".join(k["enum"]) + "}"
    else:
        bounds = f"[{k['min']}, {k['max']}]" + (f" step {k['step']}" if k["step"] > 1 else "")
    return f"{k['name']:<20} {k['text']:<12} {k['state']:<12} {k['backend']}:{k['target']}{where} {bounds}"


@app.command()
def register(
    name: str,
    backend: Annotated[str, typer.Option(help="sysctl, sysfs, bpf, sie-user, sie-kernel")],
    target: Annotated[str, typer.Option(help="sysctl key[field], /sys path, or PINNED_MAP:FIELD")],
    min: Annotated[int | None, typer.Option(help="lowest allowed value")] = None,
    max: Annotated[int | None, typer.Option(help="highest allowed value")] = None,
    step: Annotated[int | None, typer.Option(help="values are min + k*step")] = None,
    enum: Annotated[str | None, typer.Option(help="comma-separated enum values")] = None,
    netns: Annotated[str | None, typer.Option(help="network namespace file (sysctl only)")] = None,
) -> None:
    """Register one knob (its current value becomes the original xrtd restores)."""
    with _client() as c:
        try:
            values = enum.split(",") if enum is not None else None
            k = c.register(name, backend, target, min=min, max=max, step=step, enum=values, netns=netns)
        except KnobError as exc:
            _fail(exc)
        typer.echo(_line(k))


@app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    """List the registered knobs."""
    with _client() as c:
        knobs = c.list()
    if as_json:
        typer.echo(json.dumps(knobs, indent=2))
        return
    for k in knobs:
        typer.echo(_line(k))


@app.command()
def get(name: str) -> None:
    """Show one knob as JSON."""
    with _client() as c:
        try:
            typer.echo(json.dumps(c.get(name), indent=2))
        except KnobError as exc:
            _fail(exc)


@app.command("set")
def set_(
    name: str,
    value: str,
    reason: Annotated[str, typer.Option(help="why: written to the audit log")] = "set from the command line",
) -> None:
    """Apply a value (an integer, or an enum value by name)."""
    with _client() as c:
        try:
            k = c.set(name, int(value) if value.lstrip("-").isdigit() else value, reason=reason)
        except KnobError as exc:
            _fail(exc)
        typer.echo(_line(k))


@app.command()
def rollback(
    names: Annotated[list[str] | None, typer.Argument(help="knobs (default: all)")] = None,
    to: Annotated[str, typer.Option(help="original or good")] = "original",
    reason: Annotated[
        str, typer.Option(help="why: written to the audit log")
    ] = "rollback from the command line",
) -> None:
    """Put knobs back to their original (or last known-good) values."""
    with _client() as c:
        try:
            for k in c.rollback(names or None, to=to, reason=reason):
                typer.echo(_line(k))
        except KnobError as exc:
            _fail(exc)


@app.command()
def status() -> None:
    """xrtd's status: table, journal, lease, counters."""
    with _client() as c:
        typer.echo(json.dumps(c.status(), indent=2))

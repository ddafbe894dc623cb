"""`xtune analyze` and `xtune sie attach|set|detach|status`: Scoped Indirect Execution for processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from xtune.sie import attach as eng
from xtune.sie import scope as sc
from xtune.sie.spec import SpecError
from xtune.sie.variants import BuildError

app = typer.Typer()
sie = typer.Typer(no_args_is_help=True, help="Retune compiled-in perf-consts of a running process.")
app.add_typer(sie, name="sie")

Pid = Annotated[int, typer.Option("--pid", help="the target process")]
Timeout = Annotated[int, typer.Option("--timeout-ms", help="give up if threads stay in safe spans")]


@app.command("analyze")
def analyze(
    target: Annotated[list[str], typer.Argument(help="tunable spec (TOML); with --kernel, perf-const names")],
    output: Annotated[Path, typer.Option("-o", "--output", help="scope table to write (JSON)")],
    kernel: Annotated[
        bool, typer.Option("--kernel", help="kernel perf-consts, from Debian's current kernel source")
    ] = False,
    xsie: Annotated[
        Path | None, typer.Option("--xsie", help="with --kernel: also write the spans file for xsiectl")
    ] = None,
    values: Annotated[
        list[str] | None,
        typer.Option("--values", help="with --kernel: NAME=V0,V1,V2 (default: original and two others)"),
    ] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="with --kernel: rebuild cached units")] = False,
) -> None:
    """Build with each value, diff, lift, and write the scope table; print spans and refusals."""
    if kernel:
        from xtune.sie.kernel.analyze import analyze_command

        analyze_command(target, output, xsie, values, fresh)
        return
    from xtune.sie.analyze import analyze as run
    from xtune.sie.spec import load_spec

    if len(target) != 1:
        typer.echo(f"error: expected one spec file, got {len(target)}: {' '.join(target)}", err=True)
        raise typer.Exit(2)
    spec = Path(target[0])
    try:
        table = run(load_spec(spec))
    except (SpecError, BuildError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    output.write_text(table.to_json())
    for c in table.consts:
        typer.echo(
            f"{c.name}: {len(c.spans)} span(s), {len(c.refusals)} refusal(s), {table.analysis_seconds} s"
        )
        for s in c.spans:
            typer.echo(
                f"  span {s.function}+{s.start:#x}..{s.end:#x} [{s.patch}] {s.state.text} ({s.update.kind})"
            )
        for r in c.refusals:
            typer.echo(f"  refused {r.function}: {r.reason} {r.detail}")
        if c.constraint:
            typer.echo(f"  values must be: {c.constraint}")
        typer.echo(f"  valid range: [{c.min_value}, {c.max_value}]")
    for note in table.notes:
        typer.echo(f"  note: {note}")
    if not all(c.tunable for c in table.consts):
        raise typer.Exit(1)


def _fail(e: Exception) -> None:
    typer.echo(f"error: {e}", err=True)
    raise typer.Exit(1) from e


@sie.command("attach")
def attach_cmd(
    pid: Pid,
    scope: Annotated[list[Path], typer.Option("--scope", help="scope table(s) of the binary (repeatable)")],
    const: Annotated[
        list[str] | None, typer.Option("--const", help="perf-consts to arm (default: all)")
    ] = None,
    knobs: Annotated[str, typer.Option("--knobs", help="knob table file (default: a private one)")] = "",
    timeout_ms: Timeout = 2000,
) -> None:
    """Arm the perf-consts of the scope table(s) in process PID, all in one transaction."""
    try:
        table = sc.merge([sc.load(str(p)) for p in scope])
        merged = scope[0].resolve()
        if len(scope) > 1:  # `set` and `status` read one table: keep the merged one with the state
            merged = eng.STATE_ROOT / f"{pid}.scope.json"
            merged.parent.mkdir(parents=True, exist_ok=True)
            merged.write_text(table.to_json())
        att = eng.attach(pid, table, str(merged), const or None, knobs, timeout_ms)
    except (sc.ScopeError, eng.SieError, FileNotFoundError) as e:
        _fail(e)
        return
    typer.echo(f"armed {', '.join(att.slots)} in pid {pid} (knobs {att.knobs})")


@sie.command("plan")
def plan_cmd(
    scope: Annotated[Path, typer.Option("--scope", help="scope table from `xtune analyze`")],
    const: Annotated[str, typer.Option("--const", help="the perf-const")],
    output: Annotated[Path, typer.Option("-o", "--output", help="plan file to write")],
) -> None:
    """Write the engine's plan for one perf-const: xrtd's sie-user knobs take "<pid>:<plan>"."""
    try:
        table = sc.load(str(scope))
        c = table.const(const)
        if not c.tunable:
            raise eng.SieError(f"{const} is not tunable: {'; '.join(r.reason for r in c.refusals)}")
    except (sc.ScopeError, eng.SieError) as e:
        _fail(e)
        return
    output.write_text(eng.plan_text(table, {const: 0}, "/dev/shm/xtune.knobs"))
    typer.echo(f"wrote {output}: {len(c.spans)} span(s) of {const}")


@sie.command("set")
def set_cmd(
    pid: Pid,
    name: Annotated[str, typer.Argument(help="perf-const")],
    value: Annotated[int, typer.Argument(help="new value")],
) -> None:
    """Give perf-const NAME the value VALUE in PID: the engine writes it when no thread is inside
    its spans (a pass never sees two values) and refuses values outside the analysis's range."""
    try:
        att = eng.Attachment.load(pid)
        eng.set_value(pid, name, value, sc.load(att.scope).const(name))
    except (sc.ScopeError, eng.SieError) as e:
        _fail(e)


@sie.command("detach")
def detach_cmd(pid: Pid, timeout_ms: Timeout = 2000) -> None:
    """Restore the original bytes in PID and unmap the trampolines."""
    try:
        eng.detach(pid, timeout_ms)
    except eng.SieError as e:
        _fail(e)
        return
    typer.echo(f"detached from pid {pid}")


@sie.command("status")
def status_cmd(pid: Pid) -> None:
    """What is armed in PID and the values in effect."""
    try:
        typer.echo(json.dumps(eng.status(pid), indent=1))
    except eng.SieError as e:
        _fail(e)

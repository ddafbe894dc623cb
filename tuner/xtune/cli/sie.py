"""`xtune analyze` and `xtune sie attach|set|detach|status|plan`: Scoped Indirect Execution for
processes.

xrtd is the only writer of the values: `attach` registers each perf-const as a `sie-user` knob of
xrtd (named `<pid>:<CONST>`, target `<pid>:<plan>#<CONST>`, all of a process in one plan, so
xrtd's first change arms them all in one stop), `set` changes it through xrtd (checked against the
analysis's range, journaled, audited, restored when xrtd exits), `detach` unregisters them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from xtune import paths
from xtune.knobs.table import KnobClient, KnobError
from xtune.sie import attach as eng
from xtune.sie import scope as sc
from xtune.sie.spec import SpecError
from xtune.sie.variants import BuildError

app = typer.Typer()
sie = typer.Typer(no_args_is_help=True, help="Retune compiled-in perf-consts of a running process.")
app.add_typer(sie, name="sie")

Pid = Annotated[int, typer.Option("--pid", help="the target process")]
Socket = Annotated[str, typer.Option("--socket", help="xrtd's control socket")]


@app.command("analyze")
def analyze(
    output: Annotated[Path, typer.Option("-o", "--output", help="scope table to write (JSON)")],
    target: Annotated[
        list[str] | None, typer.Argument(help="tunable spec (TOML); with --kernel, perf-const names")
    ] = None,
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
    kernel_site: Annotated[
        list[str] | None,
        typer.Option(
            "--kernel-site",
            help="a kernel literal as a perf-const: NAME=FILE:LINE:TOKEN (e.g. "
            "HYSTART_DELAY_MIN_SHIFT=net/ipv4/tcp_cubic.c:439:3); implies --kernel",
        ),
    ] = None,
) -> None:
    """Build with each value, diff, lift, and write the scope table; print spans and refusals."""
    target = target or []
    if kernel or kernel_site:
        from xtune.sie.kernel.analyze import analyze_command

        analyze_command(target, output, xsie, values, fresh, kernel_site)
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
        if not c.tunable:  # a refused constant has no range: nothing about it is validated
            typer.echo("  not tunable: " + ("see the refusals above" if c.refusals else "no span found"))
            continue
        if c.constraint:
            typer.echo(f"  values must be: {c.constraint}")
        typer.echo(f"  valid range: [{c.min_value}, {c.max_value}]")
    for note in table.notes:
        typer.echo(f"  note: {note}")
    if not all(c.tunable for c in table.consts):
        raise typer.Exit(1)


def _fail(e: Exception) -> NoReturn:
    typer.echo(f"error: {e}", err=True)
    raise typer.Exit(1) from e


def _xrtd(socket: str) -> KnobClient:
    try:
        return KnobClient(socket)
    except KnobError as e:
        _fail(
            KnobError(
                f"{e}. xtune sets perf-consts only through xrtd: start it (as root) with "
                f"`xrtd --socket {socket} --state-dir {paths.XRTD_STATE_DIR}`, or name a running "
                "one with --socket"
            )
        )


def _knob(pid: int, const: str) -> str:
    return f"{pid}:{const}"


def _plan(pid: int) -> Path:
    return eng.STATE_ROOT / f"{pid}.plan"


def _attached(c: KnobClient, pid: int) -> list[dict[str, Any]]:
    """The sie-user knobs `attach` registered for `pid` (the target names the pid and its plan)."""
    prefix = f"{pid}:{_plan(pid)}#"
    return [k for k in c.list() if k["backend"] == "sie-user" and k["target"].startswith(prefix)]


@sie.command("attach")
def attach_cmd(
    pid: Pid,
    scope: Annotated[list[Path], typer.Option("--scope", help="scope table(s) of the binary (repeatable)")],
    const: Annotated[
        list[str] | None, typer.Option("--const", help="perf-consts to attach (default: all)")
    ] = None,
    socket: Socket = paths.XRTD_SOCKET,
) -> None:
    """Register the perf-consts of the scope table(s) in process PID as xrtd sie-user knobs.
    xrtd's first change arms all of them in one stop (live bytes and build id checked)."""
    try:
        table = sc.merge([sc.load(str(p)) for p in scope])
        consts = eng.process_consts(table, const or None)
        plan = _plan(pid)
        if plan.exists():
            raise eng.SieError(f"pid {pid}: already attached ({plan}); detach first")
    except (sc.ScopeError, eng.SieError) as e:
        _fail(e)
    with _xrtd(socket) as c:  # connected first: without an xrtd no plan is left behind
        plan.parent.mkdir(parents=True, exist_ok=True)
        plan.write_text(eng.plan_text(table, [k.name for k in consts]))
        done: list[str] = []
        try:
            for k in consts:  # xrtd's bounds: the analysis's range (a table with spans has both)
                target = f"{pid}:{plan}#{k.name}"
                c.register(_knob(pid, k.name), "sie-user", target, min=k.min_value, max=k.max_value)
                done.append(_knob(pid, k.name))
        except KnobError as e:
            for name in done:
                c.unregister(name)
            plan.unlink()
            _fail(e)
    typer.echo(f"registered {', '.join(done)} with xrtd at {socket}; the first `xtune sie set` arms them")


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
    output.write_text(eng.plan_text(table, [const]))
    typer.echo(f"wrote {output}: {len(c.spans)} span(s) of {const}")


@sie.command("set")
def set_cmd(
    pid: Pid,
    name: Annotated[str, typer.Argument(help="perf-const")],
    value: Annotated[int, typer.Argument(help="new value")],
    reason: Annotated[
        str, typer.Option(help="why: written to xrtd's audit log")
    ] = "set from the command line",
    socket: Socket = paths.XRTD_SOCKET,
) -> None:
    """Give perf-const NAME the value VALUE in PID through xrtd: the engine writes it when no thread
    is inside its spans (a pass never sees two values); values outside the analysis's range are
    refused and change nothing."""
    with _xrtd(socket) as c:
        attached = [k["target"].rsplit("#", 1)[1] for k in _attached(c, pid)]
        if name not in attached:
            _fail(
                eng.SieError(f"pid {pid}: no perf-const {name!r} attached (attached: {', '.join(attached)})")
            )
        try:
            k = c.set(_knob(pid, name), value, reason=reason)
        except KnobError as e:
            _fail(e)
    typer.echo(f"{name} = {k['applied']} in pid {pid}")


@sie.command("detach")
def detach_cmd(pid: Pid, socket: Socket = paths.XRTD_SOCKET) -> None:
    """Unregister PID's perf-consts from xrtd: the originals are restored, the text byte-exact."""
    with _xrtd(socket) as c:
        knobs = _attached(c, pid)
        if not knobs and not _plan(pid).exists():
            _fail(eng.SieError(f"pid {pid}: not attached (no sie-user knobs in xrtd at {socket})"))
        try:
            for k in knobs:
                c.unregister(k["name"])
        except KnobError as e:
            _fail(e)
    _plan(pid).unlink(missing_ok=True)
    typer.echo(f"detached from pid {pid}")


@sie.command("status")
def status_cmd(pid: Pid, socket: Socket = paths.XRTD_SOCKET) -> None:
    """The perf-consts attached in PID and the values in effect, as xrtd holds them."""
    with _xrtd(socket) as c:
        knobs = _attached(c, pid)
    if not knobs:
        _fail(eng.SieError(f"pid {pid}: not attached (no sie-user knobs in xrtd at {socket})"))
    values = {k["target"].rsplit("#", 1)[1]: k["applied"] for k in knobs}
    states = {k["target"].rsplit("#", 1)[1]: k["state"] for k in knobs}
    typer.echo(json.dumps({"pid": pid, "values": values, "states": states}, indent=1))

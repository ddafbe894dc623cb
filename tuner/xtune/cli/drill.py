"""`xtune drill`: where a running process spends a function's time, refined callee by callee."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from xtune.drill.image import DrillError
from xtune.drill.refine import drill as run_drill
from xtune.drill.render import tree_lines
from xtune.tuning.terminal import is_ascii, make_console

app = typer.Typer()
console = make_console()


@app.command()
def drill(
    function: Annotated[
        str, typer.Argument(help="the function to start from (a symbol of the process's files)")
    ],
    pid: Annotated[int, typer.Option(help="the running process (never restarted)")],
    depth: Annotated[int, typer.Option(help="levels to refine below FUNCTION")] = 3,
    seconds: Annotated[float, typer.Option(help="seconds per measurement")] = 5.0,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="also write the drill to this JSON file")
    ] = None,
) -> None:
    """Probe FUNCTION in a running process, then its callees (found in its machine code), and
    refine into the callee with the largest share of its time, --depth times. Every probe is
    removed when the command ends, Ctrl-C included; the process runs on unprobed."""
    try:
        result = run_drill(
            pid, function, depth, seconds, lambda line: console.print(line, highlight=False, markup=False)
        )
    except DrillError as e:
        typer.echo(f"xtune: error: {e}", err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:  # the measurement's xobserve, and with it every probe, is gone by now
        typer.echo(f"xtune: drill interrupted; its probes are removed and pid {pid} runs on", err=True)
        raise typer.Exit(130) from None
    data = result.to_json()
    for line in tree_lines(data, ascii=is_ascii(console)):
        console.print(line, highlight=False, markup=False)
    after = data["after"]
    console.print(
        f"probes removed: {after['functions_probed']} functions probed, "
        f"{len(after['probes_left'])} left; pid {pid} {'running' if after['pid_alive'] else 'gone'}",
        highlight=False,
    )
    for what in after["code_differs"]:
        console.print(f"note: code of {what} differs from its file (not a probe: no int3 at its start)")
    if json_out:
        json_out.write_text(json.dumps(data, indent=1) + "\n")
    if after["probes_left"]:
        typer.echo(f"xtune: error: probes left in pid {pid}: {', '.join(after['probes_left'])}", err=True)
        raise typer.Exit(1)

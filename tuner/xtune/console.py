"""What `xtune run` and `xtune demo` show: progress per trial, a table of knobs and SLO margins."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

from xtune.loop import RunResult, TrialResult


def _num(x: float | None, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.4g}{unit}"


class Progress:
    """Prints one line per event; `__call__` is the Runner's progress callback."""

    def __init__(self, console: Console | None = None, quiet: bool = False) -> None:
        self.console = console or Console()
        self.quiet = quiet
        self._windows = 0

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        c = self.console
        if event == "window":
            self._windows += 1
            if not self.quiet:
                c.print(".", end="")
            return
        if self._windows and not self.quiet:
            c.print()
        self._windows = 0
        if event == "baseline":
            s = data["summary"]
            bounds = ", ".join(f"{b.bound:,.4g} (+/- {b.slack:,.3g})" for b in data["guard"])
            objective = f"{_num(s.objective)} +/- {_num(s.objective_sem)}"
            c.print(f"[bold]baseline[/]: objective {objective}; SLO bounds {bounds}")
        elif event == "trial":
            params = ", ".join(f"{k}={v}" for k, v in data["params"].items())
            c.print(f"[bold]trial {data['index']}[/]: {params} ", end="")
        elif event == "trial_done":
            r: TrialResult = data["result"]
            status = "[green]ok[/]" if r.feasible else "[red]infeasible[/]"
            margins = " ".join(_num(m) for m, _ in r.summary.slo.values())
            c.print(f"objective {_num(r.summary.objective)} (SLO lhs {margins}) {status}")
        elif event == "rollback":
            c.print(f"[red]rollback[/] after {data['windows']} window(s): {data['reason']}")
        elif event == "warn":
            c.print(f"[yellow]SLO warning[/]: {data['violations']}")


def before_after(result: RunResult, console: Console | None = None) -> Table:
    """The closing table: each knob before and after, the objective and SLO lines, the gain."""
    table = Table(title="xtune: before / after")
    table.add_column("")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    best = result.best or {}
    for name, value in result.original.items():
        table.add_row(f"knob {name}", str(value), str(best.get(name, value)))
    after = result.after
    table.add_row(
        f"objective {result.objective_text}",
        _num(result.before.objective),
        _num(after.objective if after else None),
    )
    for i, line in enumerate(result.lines):
        table.add_row(
            f"SLO {line} (left side)",
            _num(result.before.slo[i][0]),
            _num(after.slo[i][0] if after else None),
        )
    gain = result.gain
    table.add_row("gain", "", "-" if gain is None else f"{100 * gain:+.1f} %")
    table.add_row("trials / rollbacks", "", f"{len(result.trials)} / {result.rollbacks}")
    (console or Console()).print(table)
    return table

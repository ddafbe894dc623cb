"""What `xtune run` and `xtune demo` show: progress per trial, a table of knobs and SLO margins."""

from __future__ import annotations

import math
from typing import Any

import rich.progress
from rich.console import Console
from rich.table import Table

from xtune.tuning.loop import RunResult, TrialResult


def _num(x: float | None, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.4g}{unit}"


class Progress:
    """The Runner's progress callback: a bar per trial (its measured windows) whose line shows the
    latest objective and SLO margins, then one result line per trial."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self._bar: rich.progress.Progress | None = None
        self._task: rich.progress.TaskID | None = None

    def _end_bar(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        c = self.console
        if event == "window":
            if self._bar is not None and self._task is not None and data["phase"] == "measure":
                margins = " ".join(f"{m:+.1%}" for m in data["margins"].values())
                self._bar.update(self._task, advance=1, live=f"obj {_num(data['objective'])} SLO {margins}")
            return
        self._end_bar()
        if event == "baseline":
            s = data["summary"]
            bounds = ", ".join(f"{b.bound:,.4g} (+/- {b.slack:,.3g})" for b in data["guard"])
            objective = f"{_num(s.objective)} +/- {_num(s.objective_sem)}"
            c.print(f"[bold]baseline[/]: objective {objective}; SLO bounds {bounds}")
        elif event == "trial":
            params = ", ".join(f"{k}={v}" for k, v in data["params"].items())
            self._bar = rich.progress.Progress(
                rich.progress.TextColumn(f"trial {data['index']}: {params}"),
                rich.progress.BarColumn(bar_width=20),
                rich.progress.MofNCompleteColumn(),
                rich.progress.TextColumn("{task.fields[live]}"),
                console=c,
                transient=True,
            )
            self._task = self._bar.add_task("trial", total=data["windows"], live="settling")
            self._bar.start()
        elif event == "trial_done":
            r: TrialResult = data["result"]
            status = (
                "[green]ok[/]"
                if r.meets_slo
                else "[red]infeasible[/]"
                if not r.feasible
                else "[yellow]SLO[/]"
            )
            params = ", ".join(f"{k}={v}" for k, v in r.params.items())
            lhs = " ".join(_num(m) for m, _ in r.summary.slo.values())
            c.print(
                f"trial {r.index}: {params} -> objective {_num(r.summary.objective)} (SLO lhs {lhs}) {status}"
            )
        elif event == "failed":
            c.print(f"[red]trial {data['index']} failed[/]: {data['reason']}")
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

"""What `xtune run` and `xtune demo` show: progress per trial, a table of knobs and SLO margins.

Objectives and SLO left sides are written with their units (`RunUnits`: the SLO file's, else the
signal catalog's). An ASCII console (`xtune.tuning.terminal`) gets ASCII only: `us` for `µs`,
`+/-`, `->`, ASCII table borders and bars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import rich.progress
from rich.console import Console
from rich.table import Table

from xtune.config.schema import SloFile
from xtune.config.units import expression_unit, format_spread, format_value, node_unit
from xtune.signals.frames import Catalog, FrameReader
from xtune.trials.store import Store
from xtune.tuning.loop import RunResult, TrialResult
from xtune.tuning.terminal import is_ascii


@dataclass
class RunUnits:
    """Units of a run's objective and of each SLO line's left side ("" when unknown)."""

    objective: str = ""
    slo: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, slo: SloFile, catalog: Catalog | None) -> RunUnits:
        units = {s.name: s.unit for s in catalog.signals} if catalog else {}
        if slo.benchmark is not None:
            units.update({f"bench.{m.name}": m.unit for m in slo.benchmark.metrics if m.unit})
        objective = slo.objective.unit or expression_unit(slo.objective.expression, units)
        return cls(objective, [node_unit(line.left, units) for line in slo.comparisons()])

    def line(self, i: int) -> str:
        return self.slo[i] if i < len(self.slo) else ""

    def record(self, store: Store, experiment_id: int) -> None:
        """Keep the units with the stored run, for `xtune report`."""
        exp = store.experiment(experiment_id)
        if exp is not None:
            config = {**exp.config, "units": {"objective": self.objective, "slo": self.slo}}
            store.update_experiment(experiment_id, config=config)


class Progress:
    """The Runner's progress callback: on a terminal, a bar per trial (its measured windows) whose
    line shows the latest objective and SLO margins; one result line per trial everywhere.

    With the run's SLO file and frame reader, objectives are written in the catalog's units
    (known once frames arrive: resolved at the baseline); `units` holds them afterwards."""

    def __init__(
        self, console: Console | None = None, slo: SloFile | None = None, reader: FrameReader | None = None
    ) -> None:
        self.console = console or Console()
        self.ascii = is_ascii(self.console)
        self.slo = slo
        self.reader = reader
        self.units = RunUnits.of(slo, None) if slo is not None else RunUnits()
        self._bar: rich.progress.Progress | None = None
        self._task: rich.progress.TaskID | None = None

    def _end_bar(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def num(self, x: float | None, unit: str) -> str:
        return format_value(x, unit, self.ascii)

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        c = self.console
        u = self.units
        if event == "window":
            if self._bar is not None and self._task is not None and data["phase"] == "measure":
                live = f"objective {self.num(data['objective'], u.objective)}"
                if data["margins"]:
                    live += " SLO margin " + " ".join(f"{m:+.1%}" for m in data["margins"].values())
                self._bar.update(self._task, advance=1, live=live)
            return
        self._end_bar()
        if event == "baseline":
            if self.slo is not None and self.reader is not None:
                self.units = u = RunUnits.of(self.slo, self.reader.catalog)
            s = data["summary"]
            objective = format_spread(s.objective, s.objective_sem, u.objective, self.ascii)
            text = f"[bold]baseline[/]: objective {objective}"
            if data["guard"]:
                bounds = ", ".join(
                    format_spread(b.bound, b.slack, u.line(i), self.ascii)
                    for i, b in enumerate(data["guard"])
                )
                text += f"; SLO bounds {bounds}"
            c.print(text, highlight=False)
        elif event == "trial":
            if (
                not c.is_interactive
            ):  # a bar redrawn in place needs a terminal; elsewhere it leaves blank lines
                return
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
            text = f"trial {r.index}: {params} -> objective {self.num(r.summary.objective, u.objective)}"
            if r.summary.slo:
                lhs = ", ".join(self.num(m, u.line(i)) for i, (m, _) in r.summary.slo.items())
                text += f" (SLO left side {lhs})"
            c.print(f"{text} {status}", highlight=False)
        elif event == "failed":
            c.print(f"[red]trial {data['index']} failed[/]: {data['reason']}", highlight=False)
        elif event == "kept":
            c.print(f"[yellow]no gain[/]: {data['reason']}", highlight=False)
        elif event == "rollback":
            after = f" after {data['windows']} window(s)" if data["windows"] is not None else ""
            c.print(f"[red]rollback[/]{after}: {data['reason']}", highlight=False)
        elif event == "warn":
            c.print(f"[yellow]SLO warning[/]: {data['violations']}", highlight=False)
        elif event == "swap":
            c.print(f"[{'red' if data['refused'] else 'green'}]swap[/]: {data['reason']}", highlight=False)


def before_after(result: RunResult, console: Console | None = None, units: RunUnits | None = None) -> Table:
    """The closing table: each knob before and after, the objective and SLO lines, the gain."""
    console = console or Console()
    ascii = is_ascii(console)
    units = units or RunUnits()
    table = Table(title="xtune: before / after")
    table.add_column("")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    final = result.after_values()
    for name, value in result.original.items():
        table.add_row(f"knob {name}", str(value), str(final[name]))
    after = result.after
    table.add_row(
        f"objective {result.objective_text}",
        format_spread(result.before.objective, result.before.objective_sem, units.objective, ascii),
        format_spread(after.objective, after.objective_sem, units.objective, ascii) if after else "-",
    )
    for i, line in enumerate(result.lines):
        table.add_row(
            f"SLO {line} (left side)",
            format_value(result.before.slo[i][0], units.line(i), ascii),
            format_value(after.slo[i][0] if after else None, units.line(i), ascii),
        )
    if result.start_again is not None:  # what the gain is against (tuning/confirm.py)
        again = result.start_again
        table.add_row(
            "objective, start's values in turns",
            format_spread(again.objective, again.objective_sem, units.objective, ascii),
            "",
        )
    gain = result.gain
    table.add_row("gain", "", "-" if gain is None or math.isnan(gain) else f"{100 * gain:+.1f} %")
    table.add_row("trials / rollbacks", "", f"{len(result.trials)} / {result.rollbacks}")
    console.print(table)
    return table

"""`xtune report`: plots of a stored run (objective per trial, knob trajectories, SLO margins when
the run has SLO lines) as PNG files and one HTML page that shows them under a one-line summary
(objective before -> after with its unit and spread, trials, rollbacks), with before/after, trial
and rollback tables; numbers are written with their units (`xtune.config.units`), and the
objective is plotted in the unit its values read best in (ms, not 2.183e+05 us), with plain tick
labels."""

from __future__ import annotations

import html
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xtune.config.units import format_spread, format_value, scale_of, significant
from xtune.trials.store import Experiment, Measurement, RollbackRow, Store, StoredTrial

STYLE = (
    "body{font-family:sans-serif;max-width:60em;margin:auto} td,th{padding:2px 8px;text-align:left}"
    " .num{text-align:right} table{border-collapse:collapse} tr:nth-child(even){background:#f4f4f4}"
    " .summary{font-size:1.15em;border-left:4px solid #48c;padding-left:8px}"
)


def write_report(store: Store, experiment_id: int, out_dir: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    exp = store.experiment(experiment_id)
    if exp is None:
        raise ValueError(f"no experiment {experiment_id} in {store.url}")
    trials = store.trials(experiment_id)
    rows = store.measurements(experiment_id)
    rollbacks = store.rollbacks(experiment_id)
    objective = exp.config["objective"]
    goal = "minimize" if objective.get("minimize") else "maximize"
    expression = objective.get(goal)
    units = stored_units(exp)

    fig, ax = plt.subplots(figsize=(7, 3.5))
    ok = [t for t in trials if t.status == "completed" and t.objective is not None]
    bad = [t for t in trials if t.status != "completed" and t.objective is not None]
    baseline = (exp.baseline or {}).get("objective")  # null: no window had a value
    values = [t.objective for t in trials if t.objective is not None]
    # Plotted in the unit the largest value reads best in: 218 ms, not 2.183e+05 us.
    factor, shown = scale_of(max((abs(v) for v in [*values, baseline or 0.0]), default=0.0), units[0])
    ax.errorbar(
        [t.index for t in ok],
        [factor * (t.objective or 0.0) for t in ok],
        [factor * (t.objective_sem or 0.0) for t in ok],
        fmt="o",
        label="completed",
    )
    ax.plot(
        [t.index for t in bad], [factor * (t.objective or 0.0) for t in bad], "rx", label="infeasible (guard)"
    )
    if baseline is not None:
        ax.axhline(factor * baseline, color="gray", ls="--", label="baseline")
    if values and min(values) > 0 and max(values) > 10 * min(values):
        ax.set_yscale("log")
    plain_ticks(ax.yaxis)
    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # trials are numbered: no 0.5 ticks
    ax.set_ylabel(f"{expression} ({shown + ', ' if shown else ''}{goal})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "objective.png", dpi=100)
    plt.close(fig)

    t0 = rows[0].t if rows else 0.0
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = sorted({k for r in rows for k in r.knobs})
    for name in names:
        pts = [(r.t - t0, r.knobs[name]) for r in rows if isinstance(r.knobs.get(name), (int, float))]
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", label=name)
    ax.set_yscale("log")
    plain_ticks(ax.yaxis)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("knob value")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "knobs.png", dpi=100)
    plt.close(fig)

    slo_lines: list[str] = list(exp.config.get("slo") or [])
    (out / "slo_margin.png").unlink(missing_ok=True)  # a previous report's, in the same directory
    if slo_lines:
        _margin_plot(plt, rows, rollbacks, t0, out / "slo_margin.png")

    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>xtune report: {esc(exp.name)}</title>
<style>{STYLE}</style>
</head><body>
<h1>xtune report: {esc(exp.name)} (run {exp.id})</h1>
<p class="summary">{esc(summary_line(exp, trials, rows, rollbacks))}</p>
<p>Objective: {goal} <code>{esc(str(expression))}</code>.
SLO: {esc("; ".join(slo_lines)) if slo_lines else "none"}.</p>
<h2>Before / after</h2>
{before_after_table(exp, trials, units)}
<h2>Objective per trial</h2><img src="objective.png" alt="objective per trial">
<h2>Knob values over time</h2><img src="knobs.png" alt="knob values over time">
{'<h2>SLO margins over time</h2><img src="slo_margin.png" alt="SLO margins over time">' if slo_lines else ""}
<h2>Trials</h2>
{trials_table(trials, units[0])}
<h2>Rollbacks</h2>
{rollbacks_table(rollbacks)}
</body></html>
"""
    path = out / "index.html"
    path.write_text(page)
    return path


def esc(x: object) -> str:
    return html.escape(str(x))


def tick_text(x: float) -> str:
    """A tick label: `significant` without trailing zeros (20, 0.5, 1,000,000)."""
    text = significant(x)
    return text.rstrip("0").rstrip(".") if "." in text else text


def plain_ticks(axis: Any) -> None:
    """Tick labels as plain numbers (1,000,000 and 0.5, never 1e6 or 2 x 10^4); on a log scale,
    2 and 5 between the powers of ten too, when the axis spans two decades or less."""
    from matplotlib.ticker import FuncFormatter

    def minor(x: float, _pos: int | None) -> str:
        lo, hi = sorted(axis.get_view_interval())
        if lo <= 0 or x <= 0 or math.log10(hi / lo) > 2:
            return ""
        return tick_text(x) if round(x / 10 ** math.floor(math.log10(x))) in (2, 5) else ""

    axis.set_major_formatter(FuncFormatter(lambda x, _pos: tick_text(x)))
    if axis.get_scale() == "log":
        axis.set_minor_formatter(FuncFormatter(minor))


def stored_units(exp: Experiment) -> tuple[str, list[str]]:
    """The run's objective unit and each SLO line's (recorded by the run, else the SLO file's)."""
    units = exp.config.get("units") or {}
    objective = units.get("objective") or exp.config.get("objective", {}).get("unit") or ""
    return objective, list(units.get("slo") or [])


def params_text(params: dict[str, Any] | None) -> str:
    """Knob values as `name=value, ...` ("-" for none)."""
    return ", ".join(f"{k}={v}" for k, v in params.items()) if params else "-"


def _spread(values: list[float]) -> float | None:
    return statistics.stdev(values) if len(values) > 1 else None


def summary_line(
    exp: Experiment,
    trials: list[StoredTrial],
    rows: list[Measurement],
    rollbacks: list[RollbackRow],
    ascii: bool = False,
) -> str:
    """One sentence saying what happened: objective before -> after with units and the spread
    of the windows measured, the gain, the values chosen, trials, rollbacks (ASCII only if asked)."""
    unit = stored_units(exp)[0]
    objective = exp.config["objective"]
    expression = objective.get("minimize") or objective.get("maximize")
    before = [r.objective for r in rows if r.phase == "baseline" and r.objective is not None]
    final = [r.objective for r in rows if r.phase == "final" and r.objective is not None]
    result = exp.result or {}
    arrow, plus_minus = ("->", "+/-") if ascii else ("\u2192", "\u00b1")
    text = f"{expression}: "
    if exp.baseline is None:
        text += "no baseline measured (the run stopped early)"
    else:
        text += format_spread(exp.baseline["objective"], _spread(before), unit, ascii)
        if result.get("after") is not None:
            text += f" {arrow} {format_spread(result['after'], _spread(final), unit, ascii)}"
            if result.get("gain") is not None:
                text += f" ({100 * result['gain']:+.1f} % better"
                if result.get("start_again") is not None:  # the start's values measured beside them
                    again = format_value(result["start_again"], unit, ascii)
                    text += f" than the start's values measured in turns with them, {again}"
                text += ")"
            text += f" with {params_text(result.get('best'))}"
        elif exp.result is not None:
            text += ", " + (result.get("kept_original") or "no better values found (knobs left as they were)")
        else:
            text += ", run not finished"
        text += f"; mean {plus_minus} standard deviation over {len(before)}"
        text += f" / {len(final)} windows" if final else " windows"
    statuses = Counter(t.status for t in trials)
    text += f"; {len(trials)} trial{'s' if len(trials) != 1 else ''}"
    if trials:
        text += " (" + ", ".join(f"{n} {status}" for status, n in sorted(statuses.items())) + ")"
    text += f"; rollbacks: {len(rollbacks) if rollbacks else 'none'}."
    return text


NUM = ' class="num"'


def _table(head: tuple[str, ...], body: Sequence[tuple[object, ...]], right: int = 1) -> str:
    """An HTML table; columns from `right` on are numbers (right-aligned)."""

    def row(cells: tuple[object, ...], tag: str) -> str:
        return (
            "<tr>"
            + "".join(f"<{tag}{NUM if i >= right else ''}>{esc(c)}</{tag}>" for i, c in enumerate(cells))
            + "</tr>"
        )

    return "<table>\n" + "\n".join([row(head, "th"), *(row(b, "td") for b in body)]) + "\n</table>"


def _best_trial(exp: Experiment, trials: list[StoredTrial]) -> StoredTrial | None:
    """The completed trial of the run's best values (the best objective among repeats), if any."""
    best = (exp.result or {}).get("best")
    done = [t for t in trials if best and t.params == best and t.status == "completed"]
    done = [t for t in done if t.objective is not None]
    sign = 1.0 if exp.config["objective"].get("minimize") else -1.0
    return min(done, key=lambda t: sign * (t.objective or 0.0)) if done else None


def before_after_table(exp: Experiment, trials: list[StoredTrial], units: tuple[str, list[str]]) -> str:
    """Knobs, objective (the best values measured again after the trials) and each SLO line: its
    bound from the baseline, and the left side's mean over the best trial's windows."""
    base = exp.baseline or {}
    result = exp.result or {}
    best = result.get("best") or {}
    values = base.get("values") or {}
    body: list[tuple[object, ...]] = [(f"knob {k}", v, best.get(k, v)) for k, v in values.items()]
    body.append(
        (
            "objective",
            format_value(base.get("objective"), units[0]),
            format_value(result.get("after"), units[0]),
        )
    )
    # A trial's SLO values are stored by line index, as JSON: {"0": [mean, sem], ...}.
    chosen = _best_trial(exp, trials)
    after_slo = (chosen.metrics.get("slo") or {}) if chosen else {}
    slack = base.get("slack", [])
    for i, (line, bound) in enumerate(zip(exp.config.get("slo", []), base.get("bounds", []), strict=False)):
        unit = units[1][i] if i < len(units[1]) else ""
        mean, sem = (after_slo.get(str(i)) or [None, None])[:2]
        after = format_spread(_finite(mean), _finite(sem), unit)
        body.append(
            (
                f"SLO {line}",
                "bound " + format_spread(bound, slack[i] if i < len(slack) else None, unit),
                after if after == "-" else f"{after} in the best trial",
            )
        )
    gain = result.get("gain")
    body.append(("gain", "", "-" if gain is None else f"{100 * gain:+.1f} %"))
    return _table(("", "before", "after"), body)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def trials_table(trials: list[StoredTrial], unit: str) -> str:
    if not trials:
        return "<p>No trials.</p>"
    body = [
        (
            t.index,
            t.policy,
            params_text(t.params),
            t.status,
            format_spread(t.objective, t.objective_sem, unit),
        )
        for t in trials
    ]
    return _table(("trial", "policy", "values", "status", "objective (mean \u00b1 sem)"), body, right=4)


def rollbacks_table(rollbacks: list[RollbackRow]) -> str:
    if not rollbacks:
        return "<p>None.</p>"
    body = [
        (
            "-" if r.trial_index is None else r.trial_index,
            r.windows,
            params_text(r.bad),
            params_text(r.restored),
            r.reason,
        )
        for r in rollbacks
    ]
    return _table(("trial", "windows", "bad values", "restored", "reason"), body, right=5)


def _margin_plot(
    plt: Any, rows: list[Measurement], rollbacks: list[RollbackRow], t0: float, path: Path
) -> None:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    lines = sorted({k for r in rows for k in r.margins})
    for line in lines:
        pts = [(r.t - t0, r.margins[line]) for r in rows if line in r.margins]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ".-", label=line)
    ax.axhline(0, color="red", lw=0.8)
    for rb in rollbacks:
        ax.axvline(rb.t - t0, color="red", ls=":")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("SLO margin (relative)")
    if lines:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

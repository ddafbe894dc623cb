"""`xtune report`: plots of a stored run (objective per trial, knob trajectories, SLO margins)
as PNG files and one HTML page that shows them with the trial table and the rollbacks."""

from __future__ import annotations

import html
from pathlib import Path

from xtune.trials.store import Store

STYLE = "body{font-family:sans-serif;max-width:60em;margin:auto} td,th{padding:2px 8px}"


def write_report(store: Store, experiment_id: int, out_dir: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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

    fig, ax = plt.subplots(figsize=(7, 3.5))
    ok = [t for t in trials if t.status == "completed" and t.objective is not None]
    bad = [t for t in trials if t.status != "completed" and t.objective is not None]
    ax.errorbar(
        [t.index for t in ok],
        [t.objective for t in ok],  # type: ignore[arg-type]  # not None: filtered above
        [t.objective_sem or 0 for t in ok],
        fmt="o",
        label="completed",
    )
    ax.plot([t.index for t in bad], [t.objective for t in bad], "rx", label="infeasible (guard)")  # type: ignore[arg-type]
    if exp.baseline:
        ax.axhline(exp.baseline["objective"], color="gray", ls="--", label="baseline")
    values = [t.objective for t in trials if t.objective is not None]
    if values and min(values) > 0 and max(values) > 10 * min(values):
        ax.set_yscale("log")
    ax.set_xlabel("trial")
    ax.set_ylabel(f"{expression} ({goal})")
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
    ax.set_xlabel("time (s)")
    ax.set_ylabel("knob value")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "knobs.png", dpi=100)
    plt.close(fig)

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
    fig.savefig(out / "slo_margin.png", dpi=100)
    plt.close(fig)

    def cell(x: object) -> str:
        return f"<td>{html.escape(str(x))}</td>"

    trial_rows = "\n".join(
        "<tr>"
        + "".join(cell(x) for x in (t.index, t.policy, t.params, t.status, t.objective, t.objective_sem))
        + "</tr>"
        for t in trials
    )
    rollback_rows = "\n".join(
        "<tr>" + "".join(cell(x) for x in (r.trial_index, r.windows, r.bad, r.restored, r.reason)) + "</tr>"
        for r in rollbacks
    )

    def header(*names: str) -> str:
        return "".join(f"<th>{n}</th>" for n in names)

    slo = "; ".join(exp.config.get("slo", []))
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>xtune report: {html.escape(exp.name)}</title>
<style>{STYLE}</style>
</head><body>
<h1>xtune report: {html.escape(exp.name)} (run {exp.id})</h1>
<p>Objective: {goal} <code>{html.escape(str(expression))}</code>; SLO: {html.escape(slo)}</p>
<p>Baseline: {html.escape(str(exp.baseline))}</p>
<p>Result: {html.escape(str(exp.result))}</p>
<h2>Objective per trial</h2><img src="objective.png">
<h2>Knob values over time</h2><img src="knobs.png">
<h2>SLO margins over time</h2><img src="slo_margin.png">
<h2>Trials</h2><table><tr>{header("trial", "policy", "values", "status", "objective", "sem")}</tr>
{trial_rows}</table>
<h2>Rollbacks</h2><table><tr>{header("trial", "windows", "bad values", "restored", "reason")}</tr>
{rollback_rows}</table>
</body></html>
"""
    path = out / "index.html"
    path.write_text(page)
    return path

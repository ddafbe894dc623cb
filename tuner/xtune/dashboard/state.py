"""One snapshot of what the dashboard shows, as plain JSON-ready data.

Sources: the trial store (experiments, trials, measurements, rollbacks), xrtd's control socket
(knob states; "not running" when nothing answers) and, when a URL is given, a Prometheus
server's HTTP API (`/api/v1/query_range`) for the exporter's series and, for a run on several
hosts, the knob states per host (each host's exporter is a file-SD target labelled `host`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import requests

from xtune.config.units import format_spread, format_value
from xtune.knobs.table import KnobClient, KnobError
from xtune.trials.report import stored_units
from xtune.trials.store import Store, StoredTrial

# At most this many points per series go to the page (the newest ones).
MAX_POINTS = 2000

# Prometheus series the page draws, per experiment: (title, PromQL with {sel} for the label matcher).
PROMETHEUS_SERIES = (
    ("objective", "xtune_objective{{{sel}}}"),
    ("SLO margin", "xtune_slo_margin{{{sel}}}"),
    ("knob applied", "xtune_knob_applied{{{sel}}}"),
    ("frames/s", "rate(xtune_frames_total{{{sel}}}[1m])"),
    ("frame gaps/s", "rate(xtune_frame_gaps_total{{{sel}}}[1m])"),
)


# Knob states per host: (field, series), each taken `by (host, knob)`.
HOST_KNOBS = (("desired", "xtune_knob_desired"), ("applied", "xtune_knob_applied"))

# Labels every series has (or that the page's title already says): left out of the series names.
SCRAPE_LABELS = ("__name__", "experiment", "run", "job", "instance")


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def best_trial(trials: list[StoredTrial], goal: str) -> StoredTrial | None:
    """The best completed (SLO-meeting) trial by the file's goal, or None."""
    ok = [t for t in trials if t.status == "completed" and _finite(t.objective) is not None]
    if not ok:
        return None
    pick = min if goal == "minimize" else max
    return pick(ok, key=lambda t: t.objective)  # type: ignore[arg-type,return-value]


@dataclass
class Sources:
    store: Store
    xrtd_socket: str
    prometheus: str = ""  # base URL, e.g. http://127.0.0.1:9090; empty: not used
    prometheus_range: float = 900.0  # seconds of history asked from Prometheus


def knob_states(socket_path: str) -> dict[str, Any]:
    try:
        with KnobClient(socket_path, timeout=1.0) as client:
            knobs = client.list()
    except (KnobError, OSError, ValueError) as exc:
        return {"running": False, "socket": socket_path, "detail": str(exc), "knobs": []}
    rows = [
        {
            "name": k.get("name"),
            "value": k.get("text", k.get("applied")),
            "state": k.get("state"),
            "backend": k.get("backend"),
            "target": k.get("target"),
        }
        for k in knobs
    ]
    return {"running": True, "socket": socket_path, "detail": "", "knobs": rows}


def _query(base: str, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
    r = requests.get(f"{base.rstrip('/')}/api/v1/{path}", params=params, timeout=3)
    r.raise_for_status()
    result: list[dict[str, Any]] = r.json()["data"]["result"]
    return result


def prometheus_series(base: str, experiment: str, run: int, seconds: float) -> dict[str, Any]:
    """The run's series over the last `seconds` (`query_range`), and its knob states per host."""
    end = time.time()
    start = end - seconds
    step = max(1.0, seconds / 300)
    # Series of this run's hosts (their targets are labelled `run`) or of an exporter serving one host.
    sel = f'experiment="{experiment}",run=~"{run}|"'
    series: list[dict[str, Any]] = []
    try:
        for title, template in PROMETHEUS_SERIES:
            span = {
                "query": template.format(sel=sel),
                "start": str(start),
                "end": str(end),
                "step": str(step),
            }
            for result in _query(base, "query_range", span):
                labels = {k: v for k, v in result["metric"].items() if k not in SCRAPE_LABELS}
                name = title + ("" if not labels else " " + ",".join(f"{k}={v}" for k, v in labels.items()))
                points = [[float(t), float(v)] for t, v in result["values"] if math.isfinite(float(v))]
                series.append({"name": name, "points": points[-MAX_POINTS:]})
        hosts = host_knobs(base, f'{sel},host!=""', seconds)
    except (requests.RequestException, ValueError, KeyError) as exc:
        return {"url": base, "error": str(exc), "series": series, "hosts": []}
    return {"url": base, "error": "", "series": series, "hosts": hosts}


def host_knobs(base: str, sel: str, seconds: float) -> list[dict[str, Any]]:
    """Each host's knobs, desired and applied: the last values Prometheus scraped within `seconds`,
    and whether the host is exported now (a host that left the run, or every host of a run that
    ended, is withdrawn from the file-SD file: its rows keep the last values)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for field, metric in HOST_KNOBS:
        query = f"max by (host, knob) (last_over_time({metric}{{{sel}}}[{seconds:.0f}s]))"
        for result in _query(base, "query", {"query": query}):
            host, knob = result["metric"]["host"], result["metric"]["knob"]
            row = rows.setdefault(
                (host, knob), {"host": host, "knob": knob, "desired": None, "applied": None}
            )
            row[field] = _finite(float(result["value"][1]))
    live = f"count by (host) (xtune_knob_applied{{{sel}}})"  # no range: stale once withdrawn
    exported = {r["metric"]["host"] for r in _query(base, "query", {"query": live})}
    return [{**rows[k], "exported": k[0] in exported} for k in sorted(rows)]


def snapshot(src: Sources, experiment_id: int | None = None) -> dict[str, Any]:
    """Everything the page shows for one experiment run (default: the newest)."""
    experiments = src.store.experiments()
    out: dict[str, Any] = {
        "generated": time.time(),
        "store": src.store.url.split("///")[-1] if src.store.url.startswith("sqlite") else "database",
        "experiments": [{"id": e.id, "name": e.name, "created": e.created} for e in experiments],
        "knobs": knob_states(src.xrtd_socket),
        "experiment": None,
    }
    chosen = [e for e in experiments if e.id == experiment_id] if experiment_id is not None else []
    exp = chosen[0] if chosen else (experiments[-1] if experiments else None)
    if exp is None:
        return out
    objective = exp.config.get("objective", {})
    goal = "minimize" if objective.get("minimize") else "maximize"
    unit = stored_units(exp)[0]
    trials = src.store.trials(exp.id)
    best = best_trial(trials, goal)
    rows = sorted(src.store.measurements(exp.id), key=lambda m: m.t)
    margins: dict[str, float] = {}
    for m in rows:
        margins.update({k: v for k, v in m.margins.items() if _finite(v) is not None})
    knobs_recorded = rows[-1].knobs if rows else {}
    series: list[dict[str, Any]] = [
        {
            "name": "objective",
            "points": [[m.t, m.objective] for m in rows if _finite(m.objective) is not None],
        }
    ]
    for line in sorted({k for m in rows for k in m.margins}):
        pts = [[m.t, m.margins[line]] for m in rows if _finite(m.margins.get(line)) is not None]
        series.append({"name": f"margin {line}", "points": pts})
    for s in series:
        s["points"] = s["points"][-MAX_POINTS:]
    out["experiment"] = {
        "id": exp.id,
        "name": exp.name,
        "goal": goal,
        "expression": objective.get(goal, ""),
        "baseline": _finite((exp.baseline or {}).get("objective")),
        # the numbers as the page shows them, with the run's units (xtune.config.units)
        "unit": unit,
        "baseline_text": format_value(_finite((exp.baseline or {}).get("objective")), unit),
        "slo": exp.config.get("slo", []),
        "trials": [
            {
                "index": t.index,
                "policy": t.policy,
                "params": t.params,
                "status": t.status,
                "objective": _finite(t.objective),
                "sem": _finite(t.objective_sem),
                "objective_text": format_spread(_finite(t.objective), _finite(t.objective_sem), unit),
            }
            for t in trials
        ],
        "best": None
        if best is None
        else {
            "index": best.index,
            "objective": best.objective,
            "objective_text": format_value(best.objective, unit),
            "params": best.params,
        },
        "margins": margins,
        "margins_text": {k: format_value(v, "fraction") for k, v in margins.items()},  # of the bound
        "knobs_recorded": knobs_recorded,
        "series": series,
        "rollbacks": [
            {
                "trial": r.trial_index,
                "t": r.t,
                "reason": r.reason,
                "bad": r.bad,
                "restored": r.restored,
                "windows": r.windows,
            }
            for r in sorted(src.store.rollbacks(exp.id), key=lambda r: r.t)
        ],
    }
    if src.prometheus:
        out["prometheus"] = prometheus_series(src.prometheus, exp.name, exp.id, src.prometheus_range)
    return out

"""The Grafana dashboard for the exporter's metrics (`tuning/metrics.py`), generated with grafanalib.

`python -m xtune.dashboard.grafana [OUT]` writes it (default: `grafana/xtune.json` beside this
file, the copy that ships); a test checks that copy against this generator and every metric it
queries against the names the exporter registers. Import it in Grafana with a Prometheus data
source; the `experiment` variable picks the run, `host` the hosts of a run on several (their
targets' label in the file-SD file; "All" also matches a one-host run's series, which have none).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from grafanalib._gen import DashboardEncoder
from grafanalib.core import Dashboard, GridPos, Stat, Target, Template, Templating, TimeSeries

SHIPPED = Path(__file__).parent / "grafana" / "xtune.json"
DATASOURCE = "${datasource}"
SEL = 'experiment=~"$experiment",host=~"$host"'
LATENCY = f"rate(xtune_loop_latency_seconds_bucket{{{SEL}}}[1m])"

# (title, unit, [(PromQL, legend)]) per time-series panel; PromQL names only exporter metrics.
PANELS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("Objective (latest window)", "short", [(f"xtune_objective{{{SEL}}}", "{{experiment}} {{host}}")]),
    (
        "SLO margins (negative: violated)",
        "percentunit",
        [(f"xtune_slo_margin{{{SEL}}}", "{{host}} {{slo}}")],
    ),
    (
        "Knobs: desired and applied",
        "short",
        [
            (f"xtune_knob_desired{{{SEL}}}", "{{host}} {{knob}} desired"),
            (f"xtune_knob_applied{{{SEL}}}", "{{host}} {{knob}} applied"),
        ],
    ),
    (
        "Trials finished per minute, by status",
        "short",
        [(f"sum by (status) (increase(xtune_trials_total{{{SEL}}}[1m]))", "{{status}}")],
    ),
    (
        "Guard rollbacks per minute",
        "short",
        [(f"increase(xtune_rollbacks_total{{{SEL}}}[1m])", "{{experiment}} {{host}}")],
    ),
    (
        "Observer frames and gaps per second",
        "short",
        [
            (f"rate(xtune_frames_total{{{SEL}}}[1m])", "frames"),
            (f"rate(xtune_frame_gaps_total{{{SEL}}}[1m])", "gaps"),
        ],
    ),
    (
        "Loop latency per frame (p50, p99)",
        "s",
        [
            (
                f"histogram_quantile({q}, sum by (le) ({LATENCY}))",
                f"p{round(q * 100)}",
            )
            for q in (0.5, 0.99)
        ],
    ),
]

STATS: list[tuple[str, str]] = [
    ("Trials", f"sum(xtune_trials_total{{{SEL}}})"),
    ("Infeasible trials", f'sum(xtune_trials_total{{{SEL},status="infeasible"}})'),
    ("Rollbacks", f"sum(xtune_rollbacks_total{{{SEL}}})"),
    ("Frame gaps", f"sum(xtune_frame_gaps_total{{{SEL}}})"),
]


def dashboard() -> Dashboard:
    stats = [
        Stat(
            title=title,
            dataSource=DATASOURCE,
            targets=[Target(expr=expr, refId="A")],
            gridPos=GridPos(h=4, w=6, x=6 * i, y=0),
        )
        for i, (title, expr) in enumerate(STATS)
    ]
    series = [
        TimeSeries(
            title=title,
            dataSource=DATASOURCE,
            unit=unit,
            targets=[
                Target(expr=expr, legendFormat=legend, refId=chr(ord("A") + j))
                for j, (expr, legend) in enumerate(queries)
            ],
            gridPos=GridPos(h=8, w=12, x=12 * (i % 2), y=4 + 8 * (i // 2)),
        )
        for i, (title, unit, queries) in enumerate(PANELS)
    ]
    return Dashboard(
        title="xtune",
        uid="xtune-tuning",
        description="xtune's tuning loop: objective, SLO margins, knobs, trials, rollbacks, frames",
        tags=["xtune"],
        timezone="browser",
        refresh="5s",
        panels=[*stats, *series],
        templating=Templating(
            list=[
                Template(
                    name="datasource",
                    query="prometheus",
                    type="datasource",
                    label="Prometheus",
                ),
                _label_variable("experiment", "label_values(xtune_objective, experiment)"),
                _label_variable("host", 'label_values(xtune_knob_applied{experiment=~"$experiment"}, host)'),
            ]
        ),
    ).auto_panel_ids()


def _label_variable(name: str, query: str) -> Template:
    """A variable over a label's values: several or all of them ("All" matches any, none too)."""
    return Template(
        name=name,
        query=query,
        dataSource=DATASOURCE,
        label=name,
        includeAll=True,
        multi=True,
        allValue=".*",
    )


def dashboard_json() -> str:
    data: dict[str, Any] = dashboard().to_json_data()
    return json.dumps(data, cls=DashboardEncoder, sort_keys=True, indent=2) + "\n"


def metric_names(text: str) -> set[str]:
    """The `xtune_*` series names a dashboard's queries read."""
    exprs = [t["expr"] for p in json.loads(text)["panels"] for t in p.get("targets", [])]
    return {m for e in exprs for m in re.findall(r"\bxtune_[a-z0-9_]+", e)}


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else SHIPPED
    out.write_text(dashboard_json())
    print(out)


if __name__ == "__main__":
    main()

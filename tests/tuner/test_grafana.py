"""The shipped Grafana dashboard is the generator's output and reads only metrics the exporter has."""

from __future__ import annotations

import json

import pytest
from xtune.dashboard.grafana import SHIPPED, dashboard_json, metric_names
from xtune.tuning.metrics import Metrics

pytestmark = pytest.mark.fast


def _exported_series() -> set[str]:
    """Every series name the exporter writes once each metric has a child (label set)."""
    m = Metrics("names")
    m.knob("k", 1, 1)
    m.window(1.0, {"slo": 0.1})
    m.trials.labels("names", "completed").inc()
    m.rollbacks.labels("names").inc()
    m.frames.labels("names").inc()
    m.frame_gaps.labels("names").inc()
    m.loop_latency.labels("names").observe(1e-5)
    return {s.name for family in m.registry.collect() for s in family.samples}


def test_shipped_dashboard_is_generated() -> None:
    assert SHIPPED.read_text() == dashboard_json(), "regenerate: python -m xtune.dashboard.grafana"


def test_dashboard_queries_only_exported_metrics() -> None:
    used = metric_names(SHIPPED.read_text())
    exported = _exported_series()
    assert used <= exported, f"not exported: {sorted(used - exported)}"
    families = {n.removesuffix("_total").removesuffix("_bucket") for n in used}
    assert {"xtune_objective", "xtune_slo_margin", "xtune_rollbacks", "xtune_trials"} <= families


def test_dashboard_panels_have_targets_and_the_experiment_and_host_variables() -> None:
    data = json.loads(SHIPPED.read_text())
    assert data["uid"] == "xtune-tuning"
    assert all(p["targets"] and all(t["expr"] for t in p["targets"]) for p in data["panels"])
    names = [v["name"] for v in data["templating"]["list"]]
    assert names == ["datasource", "experiment", "host"]
    exprs = [t["expr"] for p in data["panels"] for t in p["targets"]]
    assert all('experiment=~"$experiment",host=~"$host"' in e for e in exprs)

"""`xtune run --hosts --resume RUN` refuses, with the reason, what it cannot continue exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from xtune import paths
from xtune.cli.tune import app
from xtune.config import load
from xtune.config.schema import SloFile
from xtune.hosts.coordinator import FleetError, resumable
from xtune.trials.store import Store, StoredTrial

SLO = paths.ROOT / "experiments/fleet/sysctl-score.yaml"


def config(slo: SloFile) -> dict[str, Any]:
    return {**slo.model_dump(mode="json"), "hosts": ["h1", "h2"]}


def test_what_cannot_be_resumed_is_refused_with_the_reason(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'trials.db'}")
    slo = load(SLO, {"MEASURE_S": "1", "BUDGET": "2"})
    run = store.new_experiment(slo.name, config(slo))
    trial = StoredTrial(0, "bo@h1", {"somaxconn": 3000, "fin_timeout": 20}, "completed", -0.1, 0.0, {})
    store.add_trial(run, trial, 1.0, 2.0)
    assert resumable(store, run, slo, config(slo)) == [trial]
    with pytest.raises(FleetError, match=f"cannot resume run {run + 1}: no such run"):
        resumable(store, run + 1, slo, config(slo))
    with pytest.raises(FleetError, match="differ from the run's in hosts"):
        resumable(store, run, slo, {**config(slo), "hosts": ["h1"]})
    longer = load(SLO, {"MEASURE_S": "2", "BUDGET": "2"})
    with pytest.raises(FleetError, match="differ from the run's in benchmark"):
        resumable(store, run, longer, config(longer))
    random = slo.model_copy(update={"policy": slo.policy.model_copy(update={"kind": "random"})})
    with pytest.raises(FleetError, match="policy 'random' would suggest its first trials again"):
        resumable(store, run, random, config(random))
    store.add_trial(run, StoredTrial(1, "bo@h2", trial.params, "failed", None, None, {}), 2.0, 3.0)
    with pytest.raises(FleetError, match="its budget of 2 trials is spent"):
        resumable(store, run, slo, config(slo))
    store.update_experiment(run, result={"best": None})
    with pytest.raises(FleetError, match="it ended"):
        resumable(store, run, slo, config(slo))


def test_resume_needs_the_hosts_file(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'trials.db'}"
    argv = ["run", str(SLO), "--db", db, "--var", "MEASURE_S=1", "--var", "BUDGET=2", "--resume", "1"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2 and "--resume continues a run on several hosts" in result.output
    assert not (tmp_path / "trials.db").exists()  # refused before any store is made

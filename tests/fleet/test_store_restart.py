"""PostgreSQL restarted in the middle of a run on several hosts: the store's writes that meet the
outage wait for the server, and the run ends with every trial of its budget stored, each once."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from xtune import paths
from xtune.config import load, load_hosts
from xtune.hosts.coordinator import run_fleet
from xtune.testing.fleet import SimulatedFleet
from xtune.testing.postgres import Cluster, temporary_cluster
from xtune.trials.store import Store
from xtune.tuning.metrics import Metrics

pytestmark = pytest.mark.root
SLO = paths.ROOT / "experiments/fleet/sysctl-score.yaml"
DOWN_S = 2.0  # the server stays down longer than a trial's benchmark (1 s)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A cluster of the test's own, since the test stops and starts it."""
    with temporary_cluster() as cluster:
        yield cluster


def test_postgresql_restarted_mid_run_loses_no_trial(
    bin_dir: Path, tmp_path: Path, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    budget = 4
    slo = load(SLO, {"MEASURE_S": "1", "BUDGET": str(budget)})
    store = Store(cluster.create_database("fleet"))
    restart: list[threading.Timer] = []

    def progress(host: str, event: str, data: dict[str, Any]) -> None:
        # Trial 2 is measured, not yet stored: its host's next write finds the server down.
        if event == "window" and data["phase"] == "measure" and data["trial"] == 2 and not restart:
            cluster.stop()
            restart.append(threading.Timer(DOWN_S, cluster.start))
            restart[0].start()

    caplog.set_level(logging.WARNING, logger="xtune.trials.store")
    try:
        with SimulatedFleet(tmp_path, 2) as f:
            result = run_fleet(slo, load_hosts(f.hosts_file), store, Metrics(slo.name), progress)
    finally:
        for timer in restart:  # the server is up again before the fixture stops it
            timer.join()
    assert restart, "trial 2 was never measured"
    assert [r.error for r in result.hosts] == [None, None]
    assert "connection lost while storing trial 2" in caplog.text  # the outage met a write
    trials = store.trials(result.experiment_id)
    assert sorted(t.index for t in trials) == list(range(budget))  # every trial, none twice
    assert all(t.status == "completed" for t in trials)
    windows = [(m.phase, m.trial_index, m.t) for m in store.measurements(result.experiment_id)]
    assert len(set(windows)) == len(windows)
    assert len([w for w in windows if w[0] == "measure"]) == budget  # one benchmark window a trial
    ended = store.experiment(result.experiment_id)
    assert ended is not None and ended.result is not None  # the run's last write, after the restart

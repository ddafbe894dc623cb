"""Prometheus scrapes each host of a run through the coordinator's file-SD file: one exporter and
target per host, whose series carry the host's name as `host` and hold what was applied on that
host; the file lists the hosts while they run and is gone when the run ends."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import requests
from typer.testing import CliRunner
from xtune import paths
from xtune.cli.tune import app
from xtune.config import load
from xtune.hosts.exporters import HostExporters
from xtune.testing.fleet import SimulatedFleet
from xtune.testing.prometheus import PrometheusServer, ScrapedRun, knob_values
from xtune.trials.store import Store

SLO = paths.ROOT / "experiments/fleet/sysctl-score.yaml"


@pytest.mark.root
def test_prometheus_has_each_hosts_knobs_under_its_host_label(tmp_path: Path, bin_dir: Path) -> None:
    slo = load(SLO, {"MEASURE_S": "0", "BUDGET": "4"})
    store = Store(f"sqlite:///{tmp_path / 'trials.db'}")
    with SimulatedFleet(tmp_path, 2) as fleet, PrometheusServer(tmp_path / "prom", tmp_path / "sd") as prom:
        scraped = ScrapedRun(prom, fleet, slo, store)
        result = scraped.run()
        assert scraped.listed_at_end == []  # every host withdrawn at the end of the run
        assert scraped.file is not None and not scraped.file.exists()  # and the file removed after it
        assert {r.host.name: r.error for r in result.hosts} == {"h1": None, "h2": None}
        assert sorted(scraped.applied) == ["h1", "h2"]
        instances = set()
        for host, series in scraped.series.items():
            # One series per knob, labelled with this host (and run): its values were the host's own.
            assert sorted(s["metric"]["knob"] for s in series) == sorted(k.name for k in slo.knobs)
            for s in series:
                labels = s["metric"]
                assert (labels["host"], labels["run"]) == (host, str(result.experiment_id))
                assert (labels["experiment"], labels["job"]) == (slo.name, "xtune")
                instances.add(labels["instance"])
        assert len(instances) == 2  # an exporter per host
        trials = sorted(store.trials(result.experiment_id), key=lambda t: t.index)
        last = {t.policy.removeprefix("bo@"): t for t in trials}  # each host's last trial
        assert {h: {k: float(v) for k, v in t.params.items()} for h, t in last.items()} == scraped.applied
        # The run ended: no target is left, and the last values stay in Prometheus' history.
        prom.until("every target gone", "up", lambda r: r == [])
        for host, values in scraped.applied.items():
            kept = prom.query(f'last_over_time(xtune_knob_applied{{host="{host}"}}[5m])')
            assert knob_values(kept) == values


def test_exporters_listed_withdrawn_and_refused(tmp_path: Path) -> None:
    """Without a fleet: the file lists a target per served host (its address, labels host and run)
    that answers with its own series; a withdrawn host is gone from the file and stops answering;
    a wildcard address or a directory that cannot be made is refused before anything is served."""
    sd = tmp_path / "sd"
    with HostExporters("exp", "127.0.0.1", sd) as exporters:
        a, b = exporters.serve("a", 7), exporters.serve("b", 7)
        a.knob("somaxconn", 1024, 1000)
        b.knob("somaxconn", 4096, 4096)
        listed = json.loads(exporters.file.read_text())
        assert listed == [
            {"targets": [f"127.0.0.1:{a.port}"], "labels": {"host": "a", "run": "7"}},
            {"targets": [f"127.0.0.1:{b.port}"], "labels": {"host": "b", "run": "7"}},
        ]
        assert [p.name for p in sd.iterdir()] == ["exp.json"]  # nothing half-written left beside it
        text = requests.get(f"http://127.0.0.1:{a.port}/metrics", timeout=5).text
        assert 'xtune_knob_applied{experiment="exp",knob="somaxconn"} 1000.0' in text
        assert "4096" not in text  # b's values are b's exporter's only
        exporters.withdraw("b")
        assert [t["labels"]["host"] for t in json.loads(exporters.file.read_text())] == ["a"]
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{b.port}/metrics", timeout=5)
    assert not exporters.file.exists()
    with pytest.raises(ValueError, match="a wildcard is no address Prometheus can scrape"):
        HostExporters("exp", "0.0.0.0", tmp_path / "other")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=re.escape(f"file-SD directory {tmp_path / 'file' / 'sd'}: ")):
        HostExporters("exp", "127.0.0.1", tmp_path / "file" / "sd")
    assert not (tmp_path / "other").exists()


def test_xtune_run_refuses_a_wildcard_exporter_address_before_making_the_store(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(f'hosts:\n  - {{name: h1, bridge: "tcp://127.0.0.1:7207", keys: {tmp_path}}}\n')
    db = f"sqlite:///{tmp_path / 'trials.db'}"
    argv = ["run", str(SLO), "--hosts", str(hosts), "--db", db, "--var", "MEASURE_S=0", "--var", "BUDGET=2"]
    argv += ["--metrics-addr", "0.0.0.0:0", "--prometheus-sd", str(tmp_path / "sd")]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2 and "exporter address 0.0.0.0: a wildcard" in result.output
    assert not (tmp_path / "trials.db").exists() and not (tmp_path / "sd").exists()

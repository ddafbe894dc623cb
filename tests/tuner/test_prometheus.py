"""A real Prometheus server scrapes xtune's exporter; a series comes back through its HTTP API."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests
from xtune.host.services import free_port
from xtune.tuning.metrics import Metrics


def test_prometheus_scrapes_knob_and_margin_series(tmp_path: Path) -> None:
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.fail("prometheus is not installed (scripts/apt-packages.txt lists it): run `make setup`")
    metrics = Metrics("prom-test")
    port = metrics.serve("127.0.0.1", 0)
    metrics.knob("rcv_buf_max", 65536, 65536)
    metrics.window(12345.0, {"func.bulk_chunk.rate >= 0.95 * baseline": 0.04})
    metrics.rollbacks.labels("prom-test").inc()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s}\n"
        f"scrape_configs:\n  - job_name: xtune\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
    )
    web = free_port()
    proc = subprocess.Popen(
        [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}"]
        + [f"--web.listen-address=127.0.0.1:{web}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        found: dict = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not found:
            time.sleep(1)
            try:
                r = requests.get(
                    f"http://127.0.0.1:{web}/api/v1/query",
                    params={"query": 'xtune_knob_applied{knob="rcv_buf_max"}'},
                    timeout=2,
                )
            except requests.ConnectionError:
                continue
            results = r.json()["data"]["result"]
            found = results[0] if results else {}
        assert found, "Prometheus never returned the series"
        assert found["metric"]["job"] == "xtune" and found["metric"]["experiment"] == "prom-test"
        assert float(found["value"][1]) == 65536
        r = requests.get(
            f"http://127.0.0.1:{web}/api/v1/query", params={"query": "xtune_rollbacks_total"}, timeout=2
        )
        assert float(r.json()["data"]["result"][0]["value"][1]) == 1
    finally:
        proc.terminate()
        proc.wait(10)
        metrics.close()

"""`xtune dashboard` in a real browser (Debian's chromium, headless, driven by selenium): what the
page shows equals the trial store, and a trial added to the store appears without a reload; with
a real Prometheus, xrtd's knobs and the exporter's series, and a run on two hosts' knob states per
host as Prometheus scraped them through the coordinator's file-SD file."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import requests
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from xtune import paths
from xtune.config import load
from xtune.dashboard.server import DashboardServer
from xtune.dashboard.state import Sources, best_trial
from xtune.host.services import free_port
from xtune.testing.fleet import SimulatedFleet
from xtune.testing.prometheus import PrometheusServer, ScrapedRun
from xtune.testing.xrtd import Xrtd
from xtune.trials.store import Store, StoredTrial
from xtune.tuning.metrics import Metrics

XTUNE = str(paths.ROOT / ".venv/bin/xtune")
SLO = "func.bulk_chunk.rate >= 0.9 * baseline"
REASON = f"guard: {SLO} violated in 2 of 2 windows (margin -0.41)"


def _fill(store: Store) -> int:
    """A run as the loop writes it: baseline, windows, three trials (one tripped the guard)."""
    exp = store.new_experiment(
        "dash-bufferbloat",
        {"objective": {"minimize": "p99(tcp.srtt)"}, "slo": [SLO], "knobs": [], "units": {"objective": "us"}},
    )
    store.update_experiment(exp, baseline={"objective": 158000.0})
    base = {"rcv_buf_max": 6291456, "snd_buf_max": 4194304}
    for _ in range(3):
        store.add_measurement(exp, "baseline", 158000.0, {SLO: 0.08}, base)
    trials = [
        ({"rcv_buf_max": 65536, "snd_buf_max": 16384}, "completed", 7950.5),
        ({"rcv_buf_max": 33554432, "snd_buf_max": 33554432}, "infeasible", 203000.0),
        ({"rcv_buf_max": 131072, "snd_buf_max": 8192}, "completed", 4012.25),
    ]
    for i, (params, status, objective) in enumerate(trials):
        t = time.time()
        margin = -0.41 if status == "infeasible" else 0.03
        store.add_measurement(exp, "measure", objective, {SLO: margin}, params, trial_index=i)
        if status == "infeasible":
            store.add_rollback(exp, i, REASON, params, base, 2)
        store.add_trial(exp, StoredTrial(i, "bo", params, status, objective, 12.0, {"slo0": 0.9}), t, t + 1)
    return exp


T = TypeVar("T")


def _read(b: webdriver.Chrome, read: Callable[[webdriver.Chrome], T]) -> T:
    """read(b), again when the page redrew under it: it redraws at every poll, so an element found
    a moment ago can be gone by the time its text is asked for."""
    for _ in range(20):
        try:
            return read(b)
        except StaleElementReferenceException:
            time.sleep(0.05)
    return read(b)


def _text(b: webdriver.Chrome, css: str) -> str:
    return _read(b, lambda d: d.find_element(By.CSS_SELECTOR, css).text)


def test_dashboard_shows_the_store_and_updates_live(browser: webdriver.Chrome, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'trials.db'}"
    store = Store(db)
    exp = _fill(store)
    port = free_port()
    args = [XTUNE, "dashboard", "--db", db, "--addr", f"127.0.0.1:{port}"]
    args += ["--xrtd-socket", str(tmp_path / "no-xrtd.sock")]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 20
        while True:
            try:
                requests.get(url + "api/state", timeout=2).raise_for_status()
                break
            except requests.ConnectionError:
                assert server.poll() is None and time.monotonic() < deadline, "dashboard did not start"
                time.sleep(0.2)

        browser.get(url + "?poll=300")
        wait = WebDriverWait(browser, 15)
        wait.until(lambda b: _text(b, "#trial-count") == "3")
        trials = store.trials(exp)
        best = best_trial(trials, "minimize")
        assert best is not None and best.objective == 4012.25
        value = _read(browser, lambda d: d.find_element(By.ID, "best-objective").get_attribute("data-value"))
        assert float(value or "nan") == best.objective
        assert _text(browser, "#best-objective") == "4.01 ms"  # with its unit, scaled
        assert _text(browser, "#baseline") == "158 ms"
        assert "trial 2" in _text(browser, "#best-trial")
        assert _text(browser, "#experiment-name") == "dash-bufferbloat"
        assert len(browser.find_elements(By.CSS_SELECTOR, "#trials tbody tr")) == len(trials)
        assert len(browser.find_elements(By.CSS_SELECTOR, "#trials tbody tr.infeasible")) == 1
        reasons = _read(
            browser, lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, "#rollbacks td.reason")]
        )
        assert reasons == [r.reason for r in store.rollbacks(exp)] == [REASON]
        assert _text(browser, "#rollback-count") == "1"
        assert SLO in _text(browser, "#margins") and "3.0 %" in _text(browser, "#margins")
        assert "7.95 ms ± 0.0120 ms" in _text(browser, "#trials")
        assert "not running" in _text(browser, "#knob-source")
        assert "rcv_buf_max" in _text(browser, "#knobs")
        assert len(browser.find_elements(By.CSS_SELECTOR, "#charts svg polyline")) == 2  # objective, margin

        # A new, better trial: the page picks it up by polling, with no reload.
        browser.execute_script("window.__sameLoad = 42;")
        t = time.time()
        better = {"rcv_buf_max": 98304, "snd_buf_max": 8192}
        store.add_trial(exp, StoredTrial(3, "bo", better, "completed", 3950.0, 10.0, {}), t, t + 1)
        wait.until(lambda b: _text(b, "#trial-count") == "4")
        wait.until(
            lambda b: (
                _read(b, lambda d: d.find_element(By.ID, "best-objective").get_attribute("data-value"))
                == "3950"
            )
        )
        assert "trial 3" in _text(browser, "#best-trial")
        assert browser.execute_script("return window.__sameLoad;") == 42
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=10)
    assert f"127.0.0.1:{port}" in out


def test_dashboard_knobs_from_xrtd_and_series_from_prometheus(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    """With xrtd running the knob table is xrtd's; with --prometheus the exporter's series are drawn."""
    store = Store(f"sqlite:///{tmp_path / 'trials.db'}")
    _fill(store)
    ns = f"xtune-dash-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    xrtd = Xrtd(tmp_path)
    metrics = Metrics("dash-bufferbloat")
    prom = PrometheusServer(tmp_path / "prometheus", tmp_path / "sd")
    server: DashboardServer | None = None
    try:
        xrtd.start()
        c = xrtd.client()
        c.register("somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=f"/run/netns/{ns}")
        c.set("somaxconn", 2048, reason="dashboard test")
        exporter = metrics.serve("127.0.0.1", 0)
        metrics.window(4012.25, {SLO: 0.03})
        prom.start()
        (tmp_path / "sd" / "xtune.json").write_text(json.dumps([{"targets": [f"127.0.0.1:{exporter}"]}]))
        server = DashboardServer(Sources(store, xrtd.socket, prom.url, 300)).start()
        browser.get(server.url + "?poll=500")
        wait = WebDriverWait(browser, 40)
        wait.until(lambda b: "somaxconn" in _text(b, "#knobs"))
        assert f"xrtd at {xrtd.socket})" in _text(browser, "#knob-source")
        row = _text(browser, "#knobs tbody tr")
        assert "2048" in row and f"sysctl:{c.get('somaxconn')['target']}" in row
        wait.until(lambda b: "from Prometheus" in _text(b, "#series-source"))
        wait.until(lambda b: f"SLO margin slo={SLO}: 0.03" in _text(b, "#charts"))
        assert "objective: 4012.3" in _text(browser, "#charts")
    finally:
        if server is not None:
            server.stop()
        prom.close()
        metrics.close()
        xrtd.cleanup()
        subprocess.run(["ip", "netns", "delete", ns], check=False)


def test_dashboard_shows_each_hosts_knobs_from_prometheus(
    browser: webdriver.Chrome, tmp_path: Path, bin_dir: Path
) -> None:
    """A run on two hosts, each its own exporter listed in the coordinator's file-SD file that a real
    Prometheus reads: the page's table per host holds, for every host and knob, the value the run
    applied there last (read in the host's namespace while Prometheus scraped it)."""
    slo = load(paths.ROOT / "experiments/fleet/sysctl-score.yaml", {"MEASURE_S": "0", "BUDGET": "4"})
    store = Store(f"sqlite:///{tmp_path / 'trials.db'}")
    with SimulatedFleet(tmp_path, 2) as fleet, PrometheusServer(tmp_path / "prom", tmp_path / "sd") as prom:
        scraped = ScrapedRun(prom, fleet, slo, store)
        result = scraped.run()
        assert [r.error for r in result.hosts] == [None, None]
        prom.until("the run's targets withdrawn", "up", lambda r: r == [])
        server = DashboardServer(Sources(store, str(tmp_path / "no-xrtd.sock"), prom.url, 300)).start()
        try:
            browser.get(server.url + "?poll=500")
            WebDriverWait(browser, 30).until(lambda b: "by host" in _text(b, "#host-knob-source"))
            rows = _read(
                browser,
                lambda d: [
                    [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                    for tr in d.find_elements(By.CSS_SELECTOR, "#host-knobs tbody tr")
                ],
            )
        finally:
            server.stop()
    shown = {
        (host, knob): (float(desired), float(applied), exported)
        for host, knob, desired, applied, exported in rows
    }
    applied = {(h, k): v for h, values in scraped.applied.items() for k, v in values.items()}
    assert len(applied) == 2 * len(slo.knobs)
    # A sysctl takes the integer asked for: desired equals applied. The run ended: no host is exported.
    assert shown == {key: (v, v, "no longer: last values") for key, v in applied.items()}

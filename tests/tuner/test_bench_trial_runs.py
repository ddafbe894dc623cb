"""Several benchmark runs per trial (`policy.windows` in an SLO file with a `benchmark`): the
trial's objective is the mean of its runs, every run is stored as a measurement of the trial, and
one failed run fails the trial."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import Lab
from xtune import paths
from xtune.host.services import free_port
from xtune.trials.store import Store

XTUNE = str(paths.ROOT / ".venv/bin/xtune")
SLO = """
name: test-trial-runs
objective: {maximize: bench.score}
knobs:
  - {name: syn_retries, backend: sysctl, target: net.ipv4.tcp_syn_retries, netns: "%s", range: [%d, %d]}
policy: {kind: grid, grid_points: 2, settle_ms: 0, windows: 3, baseline_windows: 2}
guard: {watch_windows: 1, violations: 1}
benchmark:
  command: ["sh", "%s"]
  metrics: [{name: score, json: score}]
"""


def test_a_trial_is_the_mean_of_its_runs_and_one_failed_run_fails_it(lab: Lab, tmp_path: Path) -> None:
    name = lab.net.receiver
    original = int(lab.net.sysctl(name, "net.ipv4.tcp_syn_retries"))
    good, bad = original + 3, original + 6
    runs = tmp_path / "runs"
    # The n-th run at `good` scores 10 n; the second run at `bad` fails; the original scores 0.
    score = tmp_path / "score.sh"
    score.write_text(
        f"v=$(ip netns exec {name} cat /proc/sys/net/ipv4/tcp_syn_retries)\n"
        f"echo $v >> {runs}\n"
        f"n=$(grep -cx $v {runs})\n"
        f'if [ $v = {bad} ] && [ $n = 2 ]; then echo "no figure" >&2; exit 3; fi\n'
        f'if [ $v = {good} ]; then echo "{{\\"score\\": $((10 * n))}}"; else echo \'{{"score": 0}}\'; fi\n'
    )
    slo = tmp_path / "runs.yaml"
    slo.write_text(SLO % (lab.net.path(name), good, bad, score))
    db = tmp_path / "trials.db"
    args = [XTUNE, "run", str(slo), "--db", f"sqlite:///{db}", "--xrtd-socket", lab.svc.xrtd_socket]
    args += ["--metrics-addr", f"127.0.0.1:{free_port()}"]
    res = subprocess.run(args, capture_output=True, text=True, timeout=120, env={"COLUMNS": "200"})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    store = Store(f"sqlite:///{db}")
    exp = store.experiments("test-trial-runs")[-1]
    trials = {t.params["syn_retries"]: t for t in store.trials(exp.id)}
    assert set(trials) == {good, bad}, trials
    # Three runs at `good` (10, 20, 30): the mean and its standard error (10 / sqrt(3)).
    t = trials[good]
    assert t.status == "completed" and t.objective == pytest.approx(20.0), t
    assert t.objective_sem == pytest.approx(10 / 3**0.5), t
    assert t.metrics["windows"] == 3, t
    measured = [m for m in store.measurements(exp.id) if m.phase == "measure" and m.trial_index == t.index]
    assert [m.objective for m in measured] == [10.0, 20.0, 30.0]
    # At `bad` the first run was stored, the second failed the trial with the benchmark's reason.
    f = trials[bad]
    assert f.status == "failed" and f.objective is None, f
    assert "exited with 3" in f.metrics["error"] and "no figure" in f.metrics["error"], f
    assert [m.objective for m in store.measurements(exp.id) if m.trial_index == f.index] == [0.0]
    # The best values measured again: three more runs (40, 50, 60), ahead of the start's 0.
    assert exp.result is not None and exp.result["after"] == pytest.approx(50.0), exp.result
    assert runs.read_text().split().count(str(good)) == 6
    assert int(lab.net.sysctl(name, "net.ipv4.tcp_syn_retries")) == original

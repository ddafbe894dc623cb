"""How a run ends when trials go wrong: values the kernel refuses fail their trial with the reason
and the run goes on (xrtd's transaction changed nothing, the optimizer hears a failure, never a
number); a best trial no better than the start when measured again leaves the original values."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import Lab
from xtune import paths
from xtune.host.services import free_port
from xtune.trials.store import Store

XTUNE = str(paths.ROOT / ".venv/bin/xtune")
# net.ipv4.tcp_syn_retries takes 1..127 (the kernel's proc_dointvec_minmax bound): the grid's
# values up to 127 are written, those above refused with EINVAL.
SLO = """
name: test-refused-trial
objective: {maximize: bench.score}
knobs:
  - {name: syn_retries, backend: sysctl, target: net.ipv4.tcp_syn_retries, netns: "%s", range: [1, %d]}
policy: {kind: grid, grid_points: 5, settle_ms: 0, windows: 1, baseline_windows: 2}
guard: {watch_windows: 1, violations: 1}
benchmark:
  command: ["sh", "-c", "echo '{\\"score\\": 1}'"]
  metrics: [{name: score, json: score}]
"""


def run_refused(lab: Lab, tmp_path: Path, top: int) -> tuple[subprocess.CompletedProcess[str], list]:
    slo = tmp_path / "refused.yaml"
    slo.write_text(SLO % (lab.net.path(lab.net.receiver), top))
    db = tmp_path / "trials.db"
    args = [XTUNE, "run", str(slo), "--db", f"sqlite:///{db}", "--xrtd-socket", lab.svc.xrtd_socket]
    args += ["--metrics-addr", f"127.0.0.1:{free_port()}"]
    res = subprocess.run(args, capture_output=True, text=True, timeout=120, env={"COLUMNS": "200"})
    return res, Store(f"sqlite:///{db}").trials()


def test_refused_values_fail_their_trial_and_the_run_goes_on(lab: Lab, tmp_path: Path) -> None:
    original = lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_syn_retries")
    res, trials = run_refused(lab, tmp_path, 200)  # 1, 51, 100 written; 150, 200 refused
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    status = {t.params["syn_retries"]: t for t in trials}
    assert len(status) == 5 and min(status) == 1 and max(status) == 200, trials
    for v, t in status.items():
        if v <= 127:
            assert t.status == "completed" and t.objective == 1.0, t
        else:
            assert t.status == "failed" and t.objective is None, t
            assert "tcp_syn_retries" in t.metrics["error"] and "Invalid argument" in t.metrics["error"], t
    assert "failed" in res.stdout
    assert lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_syn_retries") == original


def test_three_failed_trials_in_a_row_stop_the_run(lab: Lab, tmp_path: Path) -> None:
    """Failures one after another say more than their values are wrong: the run stops, says why,
    and the knob is back at its original value."""
    original = lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_syn_retries")
    res, trials = run_refused(lab, tmp_path, 255)  # 128, 191, 255 refused one after another
    assert res.returncode != 0 and "3 trials in a row failed" in res.stderr, res.stderr[-2000:]
    assert [t.status for t in trials] == ["completed", "completed", "failed", "failed", "failed"], trials
    assert lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_syn_retries") == original


KEEP = """
name: test-kept-original
objective: {maximize: bench.score}
knobs:
  - {name: syn_retries, backend: sysctl, target: net.ipv4.tcp_syn_retries, netns: "%s", range: [%d, %d]}
policy: {kind: grid, grid_points: 3, settle_ms: 0, windows: 2, baseline_windows: 2}
guard: {watch_windows: 1, violations: 1, on_exit: keep}
benchmark:
  command: ["sh", "%s"]
  metrics: [{name: score, json: score}]
"""


def test_no_gain_over_the_start_keeps_the_original_values(lab: Lab, tmp_path: Path) -> None:
    """Every trial scores below the start (the score peaks at the original value, which the grid
    leaves out): the best trial, measured again, is no better, so the original value is put back
    and stays after the run even with `on_exit: keep`."""
    ns = lab.net.path(lab.net.receiver)
    name = lab.net.receiver
    original = int(lab.net.sysctl(name, "net.ipv4.tcp_syn_retries"))
    lo, hi = original + 3, original + 40
    score = tmp_path / "score.sh"  # peaks at the original value
    score.write_text(
        f"v=$(ip netns exec {name} cat /proc/sys/net/ipv4/tcp_syn_retries)\n"
        f'echo "{{\\"score\\": $((0 - (v - {original}) * (v - {original})))}}"\n'
    )
    slo = tmp_path / "keep.yaml"
    slo.write_text(KEEP % (ns, lo, hi, score))
    db = tmp_path / "trials.db"
    args = [XTUNE, "run", str(slo), "--db", f"sqlite:///{db}", "--xrtd-socket", lab.svc.xrtd_socket]
    args += ["--metrics-addr", f"127.0.0.1:{free_port()}"]
    res = subprocess.run(args, capture_output=True, text=True, timeout=120, env={"COLUMNS": "200"})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    store = Store(f"sqlite:///{db}")
    exp = store.experiments("test-kept-original")[-1]
    assert exp.result is not None and exp.result["best"] is None, exp.result
    assert "no better than the start" in exp.result["kept_original"], exp.result
    trials = store.trials(exp.id)
    assert len(trials) == 3 and all(t.objective is not None and t.objective < 0 for t in trials), trials
    assert "no gain" in res.stdout
    assert int(lab.net.sysctl(name, "net.ipv4.tcp_syn_retries")) == original

"""How a run ends when trials go wrong: values the kernel refuses fail their trial with the reason
and the run goes on (xrtd's transaction changed nothing, the optimizer hears a failure, never a
number); a best trial no better than the start when measured again in turns with it leaves the
original values, on a host whose figures drift too; a trial of several benchmark runs
(`policy.windows`) is their mean, and one failed run fails it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
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


def xtune_run(lab: Lab, slo: Path, db: Path) -> subprocess.CompletedProcess[str]:
    """`xtune run` of an SLO file against the lab's xrtd, its trials stored in `db`."""
    args = [XTUNE, "run", str(slo), "--db", f"sqlite:///{db}", "--xrtd-socket", lab.svc.xrtd_socket]
    args += ["--metrics-addr", f"127.0.0.1:{free_port()}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env={"COLUMNS": "200"})


def run_refused(lab: Lab, tmp_path: Path, top: int) -> tuple[subprocess.CompletedProcess[str], list]:
    slo = tmp_path / "refused.yaml"
    slo.write_text(SLO % (lab.net.path(lab.net.receiver), top))
    db = tmp_path / "trials.db"
    res = xtune_run(lab, slo, db)
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
    res = xtune_run(lab, slo, db)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    store = Store(f"sqlite:///{db}")
    exp = store.experiments("test-kept-original")[-1]
    assert exp.result is not None and exp.result["best"] is None, exp.result
    assert "no better than the start" in exp.result["kept_original"], exp.result
    trials = store.trials(exp.id)
    assert len(trials) == 3 and all(t.objective is not None and t.objective < 0 for t in trials), trials
    assert "no gain" in res.stdout
    assert int(lab.net.sysctl(name, "net.ipv4.tcp_syn_retries")) == original


RUNS = """
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
    slo.write_text(RUNS % (lab.net.path(name), good, bad, score))
    db = tmp_path / "trials.db"
    res = xtune_run(lab, slo, db)
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
    # The best values measured again in turns with the start's, four pairs of three runs: twelve
    # more runs at `good` (40 ... 150, mean 95) against the start's 0 in each pair.
    assert exp.result is not None and exp.result["after"] == pytest.approx(95.0), exp.result
    assert exp.result["confirmation"]["best"] == pytest.approx([50.0, 80.0, 110.0, 140.0]), exp.result
    assert exp.result["confirmation"]["start"] == [0.0] * 4 and exp.result["best"], exp.result
    assert runs.read_text().split().count(str(good)) == 15
    assert int(lab.net.sysctl(name, "net.ipv4.tcp_syn_retries")) == original


DRIFT = """
name: test-drift
objective: {maximize: bench.score}
knobs:
  - {name: syn_retries, backend: sysctl, target: net.ipv4.tcp_syn_retries, netns: "%s", range: [%d, %d]}
policy: {kind: grid, grid_points: 2, settle_ms: 0, windows: 1, baseline_windows: 2, confirm_pairs: %d}
guard: {watch_windows: 1, violations: 1, on_exit: keep}
benchmark:
  command: ["sh", "%s"]
  metrics: [{name: score, json: score}]
"""


def drift_run(lab: Lab, tmp_path: Path, pairs: int, gain: int) -> tuple[dict, int, int]:
    """A host whose figure climbs by one at every run, whatever the values: the n-th run scores n,
    plus `gain` at the grid's upper value. Returns the run's result, the original and that value."""
    name = lab.net.receiver
    original = int(lab.net.sysctl(name, "net.ipv4.tcp_syn_retries"))
    lo, hi = original + 3, original + 6
    runs = tmp_path / "runs"
    score = tmp_path / "score.sh"
    score.write_text(
        f"v=$(ip netns exec {name} cat /proc/sys/net/ipv4/tcp_syn_retries)\n"
        f"echo $v >> {runs}\n"
        f"n=$(wc -l < {runs})\n"
        f"if [ $v = {hi} ]; then n=$((n + {gain})); fi\n"
        'echo "{\\"score\\": $n}"\n'
    )
    slo = tmp_path / "drift.yaml"
    slo.write_text(DRIFT % (lab.net.path(name), lo, hi, pairs, score))
    db = tmp_path / "trials.db"
    res = xtune_run(lab, slo, db)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    exp = Store(f"sqlite:///{db}").experiments("test-drift")[-1]
    assert exp.result is not None
    return exp.result, original, hi


def test_a_drifting_host_does_not_make_the_best_trial_look_better_than_the_start(
    lab: Lab, tmp_path: Path
) -> None:
    """The best trial is the last one and every run scores above the one before: measured after
    the baseline it would look better by the drift alone. Measured in turns with the start's
    values (start, best; best, start; ...) it wins every other pair by one and loses the others by
    one, and the start's values stay."""
    result, original, hi = drift_run(lab, tmp_path, pairs=4, gain=0)
    assert result["best"] is None and "no better than the start" in result["kept_original"], result
    assert result["candidate"] == {"syn_retries": hi}, result  # what was turned away stays on record
    assert result["confirmation"]["holds"] is False
    assert [
        round(b - s)
        for s, b in zip(result["confirmation"]["start"], result["confirmation"]["best"], strict=True)
    ] == [1, -1, 1, -1]
    assert int(lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_syn_retries")) == original


def test_a_real_gain_on_a_drifting_host_is_kept(lab: Lab, tmp_path: Path) -> None:
    """The same drift with 100 more at the upper value: every pair favours it (101, 99, 101, 99),
    and its values stay, set once more after the last pair, which measured the start's last."""
    result, _, hi = drift_run(lab, tmp_path, pairs=4, gain=100)
    assert result["best"] == {"syn_retries": hi} and result["kept_original"] is None, result
    conf = result["confirmation"]
    assert [round(b - s) for s, b in zip(conf["start"], conf["best"], strict=True)] == [101, 99, 101, 99], (
        conf
    )
    assert conf["holds"] and 0 < conf["lower_bound"] < conf["mean_gain"] == pytest.approx(100.0), conf
    # The gain is against the start's values measured in the same pairs, not the baseline before
    # the trials (which the drift puts a hundred runs' worth lower).
    assert result["start_again"] == pytest.approx((5 + 8 + 9 + 12) / 4), result
    assert result["gain"] == pytest.approx((106 + 107 + 110 + 111) / 4 / 8.5 - 1), result
    assert int(lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_syn_retries")) == hi

"""What a policy is told of a trial's noise: a standard error from one window is unknown, never 0
(Ax would fit that run as exact); floored at the baseline's window-to-window spread it is known;
and a run gives Ax every error or none (it refuses data where some are known and others are not)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import pytest
from conftest import BUFFERBLOAT_VARS, HERE
from xtune.config import load
from xtune.policies import Outcome, make_policy
from xtune.trials.store import StoredTrial
from xtune.tuning.loop import Summary, TrialResult

BASE = [(100.0, [10.0]), (104.0, [12.0]), (96.0, [11.0]), (100.0, None)]  # the last window has no line value


def rows(spec: Sequence[tuple[float, list[float] | None]]) -> list[tuple[float, list[float | None]]]:
    return [(obj, list(lhs) if lhs is not None else [None]) for obj, lhs in spec]


def test_one_window_has_no_error_of_its_own() -> None:
    s = Summary.of(rows([(120.0, [9.0])]), 1)
    assert s.objective == 120.0 and math.isnan(s.objective_sem) and math.isnan(s.slo[0][1])


def test_one_window_is_given_the_baselines_spread() -> None:
    base = Summary.of(rows(BASE), 1)
    trial = Summary.of(rows([(120.0, [9.0])]), 1).with_noise_floor(base)
    assert trial.objective_sem == pytest.approx(statistics.stdev([100.0, 104.0, 96.0, 100.0]))
    assert trial.slo[0] == (9.0, pytest.approx(statistics.stdev([10.0, 12.0, 11.0])))  # 3 windows had it


def test_close_windows_get_no_more_certainty_than_the_baselines_spread() -> None:
    base = Summary.of(rows(BASE), 1)
    spread = statistics.stdev([100.0, 104.0, 96.0, 100.0])
    lucky = Summary.of(rows([(120.0, [9.0]), (120.5, [9.0])]), 1).with_noise_floor(base)
    assert lucky.objective == 120.25 and lucky.objective_sem == pytest.approx(spread / math.sqrt(2))
    noisy = Summary.of(rows([(100.0, [9.0]), (140.0, [9.0])]), 1)
    assert noisy.with_noise_floor(base).objective_sem == pytest.approx(noisy.objective_sem)  # its own, larger


def test_a_one_window_baseline_leaves_every_error_unknown() -> None:
    base = Summary.of(rows(BASE[:1]), 1)
    for spec in ([(120.0, [9.0])], [(120.0, [9.0]), (130.0, [8.0])]):
        out = TrialResult(0, {}, Summary.of(rows(spec), 1).with_noise_floor(base), True, False).outcome()
        assert out.objective_sem is None and out.slo[0][1] is None


def policy_of(baseline_windows: int, warm: list[StoredTrial]) -> Any:
    slo = load(HERE / "slo_good/bufferbloat-bo.yaml", BUFFERBLOAT_VARS)
    slo.policy.baseline_windows = baseline_windows
    return make_policy(slo, {0: 170.0}, warm)


def test_ax_takes_a_run_whose_errors_are_all_unknown() -> None:
    """Ax infers the noise: the run goes on after trials told with no error at all."""
    stored = {"slo": {"0": [180.0, 1.0]}, "windows": 3}
    params = {"rcv_buf_max": 65536, "snd_buf_max": 65536}
    policy = policy_of(1, [StoredTrial(0, "bo", params, "completed", 16000.0, 12.0, stored)])
    try:
        for _ in range(3):
            index, params = policy.suggest()
            policy.complete(index, params, Outcome(20000.0, None, {0: (181.0, None)}, True))
        assert policy.suggest() is not None
    finally:
        policy.close()


def test_stored_trials_without_an_error_are_left_out_of_a_run_that_has_errors() -> None:
    """A trial stored with no error (its run's baseline had one window) beside known errors would
    make Ax refuse the run."""
    params = {"rcv_buf_max": 65536, "snd_buf_max": 65536}
    warm = [
        StoredTrial(0, "bo", params, "completed", 16000.0, 20.0, {"slo": {"0": [180.0, None]}, "windows": 1}),
        StoredTrial(1, "bo", params, "completed", 16000.0, None, {"slo": {"0": [180.0, 1.0]}, "windows": 2}),
        StoredTrial(2, "bo", params, "completed", 17000.0, 40.0, {"slo": {"0": [180.0, 1.0]}, "windows": 2}),
    ]
    policy = policy_of(4, warm)
    try:
        assert policy.warm_started == 1
        index, params = policy.suggest()
        policy.complete(index, params, Outcome(20000.0, 30.0, {0: (181.0, 2.0)}, True))
    finally:
        policy.close()

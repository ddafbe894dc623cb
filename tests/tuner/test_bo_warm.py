"""BO warm start: stored trials of the same experiment are attached to Ax before suggesting."""

from __future__ import annotations

import math

import pytest
from conftest import BUFFERBLOAT_VARS, HERE
from xtune.config import load
from xtune.policies import Outcome, make_policy
from xtune.trials.store import Store, StoredTrial


def test_warm_start_attaches_stored_trials() -> None:
    slo = load(HERE / "slo_good/bufferbloat-bo.yaml", BUFFERBLOAT_VARS)
    slo_metrics = {"slo": {"0": [180.0, 1.0]}}
    warm = [
        StoredTrial(
            0, "bo", {"rcv_buf_max": 65536, "snd_buf_max": 65536}, "completed", 16000.0, 10.0, slo_metrics
        ),
        StoredTrial(
            1,
            "bo",
            {"rcv_buf_max": 33554432, "snd_buf_max": 4194304},
            "completed",
            250000.0,
            9.0,
            slo_metrics,
        ),
        StoredTrial(
            2, "bo", {"rcv_buf_max": 1 << 40, "snd_buf_max": 65536}, "completed", 1.0, 1.0, slo_metrics
        ),
        StoredTrial(3, "bo", {"other": 1}, "completed", 1.0, 1.0, {}),
    ]
    policy = make_policy(slo, {0: 170.0}, warm)
    try:
        assert policy.warm_started == 2  # out of range and foreign trials are left out
        index, params = policy.suggest()  # type: ignore[misc]
        assert index == 2  # Ax numbered the two attached trials 0 and 1
        assert all(8192 <= v <= 33554432 and isinstance(v, int) for v in params.values())
        policy.complete(index, params, Outcome(20000.0, 5.0, {0: (181.0, 1.0)}, True))
    finally:
        policy.close()


def test_restarted_run_attaches_every_stored_trial(store_url: str) -> None:
    """A run stopped after its third trial: `xtune run` again opens the store afresh and its policy
    attaches every trial with an objective, an SLO line with no value (NaN, stored as null) too."""
    slo = load(HERE / "slo_good/bufferbloat-bo.yaml", BUFFERBLOAT_VARS)
    stopped = Store(store_url)
    exp = stopped.new_experiment(slo.name, {})
    for i, (buf, objective, status, mean) in enumerate(
        [
            (65536, 16000.0, "completed", 180.0),
            (1 << 20, 90000.0, "completed", 181.0),
            (8192, 1e6, "infeasible", math.nan),
        ]
    ):
        params = {"rcv_buf_max": buf, "snd_buf_max": buf}
        metrics = {"slo": {"0": [mean, 1.0]}}
        stopped.add_trial(exp, StoredTrial(i, "bo", params, status, objective, 10.0, metrics), 1.0, 2.0)
    stopped.add_trial(
        exp, StoredTrial(3, "bo", {"rcv_buf_max": 1, "snd_buf_max": 1}, "failed", None, None, {}), 2.0, 3.0
    )

    policy = make_policy(slo, {0: 170.0}, Store(store_url).trials(name=slo.name))
    try:
        assert policy.warm_started == 3  # the failed trial has no objective to attach
    finally:
        policy.close()


def test_log_objective_uses_the_delta_method() -> None:
    from xtune.policies.bo import _raw

    raw = _raw(Outcome(1000.0, 50.0, {0: (180.0, 2.0)}, True), log=True)
    assert raw["objective"] == pytest.approx((math.log(1000.0), 0.05))
    assert raw["slo0"] == (180.0, 2.0)  # constraints stay on their own scale

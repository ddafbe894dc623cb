"""Trial store: everything written comes back, by run and by experiment name."""

from __future__ import annotations

from pathlib import Path

from xtune.trials.store import Store, StoredTrial


def test_round_trip(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trials.db'}"
    store = Store(url)
    exp = store.new_experiment("rt", {"name": "rt", "objective": {"minimize": "x"}})
    trial = StoredTrial(0, "bo", {"a": 65536, "b": "fq"}, "completed", 12.5, 0.5, {"slo": {"0": [1.0, 0.1]}})
    store.add_trial(exp, trial, 1.0, 2.0)
    store.add_trial(exp, StoredTrial(1, "bo", {"a": 1}, "infeasible", 99.0, None, {}), 2.0, 3.0)
    store.add_measurement(exp, "measure", 12.0, {"x <= 3": 0.25}, {"a": 65536}, 0)
    store.add_decision(exp, "bo", {"a": 65536}, "bo trial 0")
    store.add_rollback(exp, 1, "x: 9 vs bound 3", {"a": 1}, {"a": 65536}, 2)
    store.update_experiment(exp, baseline={"objective": 20.0}, result={"gain": 0.4})

    again = Store(url)  # a fresh engine reads what the first wrote
    assert again.trials(exp) == [trial, StoredTrial(1, "bo", {"a": 1}, "infeasible", 99.0, None, {})]
    assert again.trials(name="rt")[0] == trial
    assert again.trials(name="other") == []
    (m,) = again.measurements(exp)
    assert (m.phase, m.objective, m.margins, m.knobs, m.trial_index) == (
        "measure",
        12.0,
        {"x <= 3": 0.25},
        {"a": 65536},
        0,
    )
    (d,) = again.decisions(exp)
    assert (d.policy, d.values, d.reason) == ("bo", {"a": 65536}, "bo trial 0")
    (r,) = again.rollbacks(exp)
    assert (r.trial_index, r.bad, r.restored, r.windows) == (1, {"a": 1}, {"a": 65536}, 2)
    e = again.experiment(exp)
    assert e is not None and e.baseline == {"objective": 20.0} and e.result == {"gain": 0.4}
    assert [x.name for x in again.experiments("rt")] == ["rt"]

"""The store keeps what a resumed run needs to rebuild its policy: a store at the schema before
`policy_state` upgrades in place with its rows kept; the state round-trips on SQLite."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text
from xtune.trials.store import MIGRATIONS, Store, StoredTrial


def test_a_store_at_the_previous_revision_upgrades_and_keeps_its_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trials.db'}"
    with create_engine(url).begin() as conn:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
        conn.execute(
            text("INSERT INTO experiments (id, name, config, created) VALUES (1, 'old', '{\"a\": 1}', 1.0)")
        )
        conn.execute(
            text(
                'INSERT INTO trials (experiment_id, "index", policy, params, status, objective,'
                " objective_sem, metrics, started, ended)"
                " VALUES (1, 0, 'bo@h1', '{\"x\": 2}', 'completed', 3.0, 0.1, '{}', 1.0, 2.0)"
            )
        )
    store = Store(url)
    old = store.experiment(1)
    assert old is not None and old.config == {"a": 1} and old.policy_state is None
    assert [(t.index, t.params) for t in store.trials(1)] == [(0, {"x": 2})]
    store.update_experiment(1, policy_state={"bounds": {"0": 2.5}})
    again = Store(url).experiment(1)
    assert again is not None and again.policy_state == {"bounds": {"0": 2.5}}
    store.add_trial(1, StoredTrial(1, "bo@h2", {"x": 3}, "failed", None, None, {}), 3.0, 4.0)
    assert [t.index for t in Store(url).trials(1)] == [0, 1]

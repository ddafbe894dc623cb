"""The store keeps what a run on several hosts needs: a store at the first schema upgrades in
place with its runs kept, then holds a run's policy state and `<policy>@<host>` names of a
32-character host, on SQLite and on PostgreSQL (which enforces column lengths)."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text
from xtune.trials.store import MIGRATIONS, Store, StoredTrial


def test_a_store_at_the_first_revision_upgrades_and_keeps_its_runs(store_url: str) -> None:
    with create_engine(store_url).begin() as conn:
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
    store = Store(store_url)
    old = store.experiment(1)
    assert old is not None and old.config == {"a": 1} and old.policy_state is None
    assert [(t.index, t.policy, t.params) for t in store.trials(1)] == [(0, "bo@h1", {"x": 2})]
    store.update_experiment(1, policy_state={"bounds": {"0": 2.5}})
    again = Store(store_url).experiment(1)
    assert again is not None and again.policy_state == {"bounds": {"0": 2.5}}
    host = "b" * 32  # the longest name a hosts file allows
    store.add_trial(1, StoredTrial(1, f"bo@{host}", {"x": 3}, "failed", None, None, {}), 3.0, 4.0)
    store.add_decision(1, f"bo@{host}", {"x": 3}, "why")
    assert [t.policy for t in Store(store_url).trials(1)] == ["bo@h1", f"bo@{host}"]

"""Trial store: everything written comes back, by run and by experiment name, on SQLite and on
PostgreSQL; the schema is the migrations' head; a store made before migrations upgrades in place;
a PostgreSQL restart loses no committed trial."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from conftest import HERE
from typer.testing import CliRunner
from xtune.cli.tune import app
from xtune.host.services import free_port
from xtune.testing.postgres import Cluster
from xtune.trials.store import MIGRATIONS, Base, Store, StoredTrial, StoreError

HEAD = ScriptDirectory(str(MIGRATIONS)).get_current_head()


def test_round_trip(store_url: str) -> None:
    store = Store(store_url)
    exp = store.new_experiment("rt", {"name": "rt", "objective": {"minimize": "x"}})
    trial = StoredTrial(0, "bo", {"a": 65536, "b": "fq"}, "completed", 12.5, 0.5, {"slo": {"0": [1.0, 0.1]}})
    store.add_trial(exp, trial, 1.0, 2.0)
    store.add_trial(exp, StoredTrial(1, "bo", {"a": 1}, "infeasible", 99.0, None, {}), 2.0, 3.0)
    store.add_measurement(exp, "measure", 12.0, {"x <= 3": 0.25}, {"a": 65536}, 0)
    store.add_decision(exp, "bo", {"a": 65536}, "bo trial 0")
    store.add_rollback(exp, 1, "x: 9 vs bound 3", {"a": 1}, {"a": 65536}, 2)
    store.update_experiment(exp, baseline={"objective": 20.0}, result={"gain": 0.4})

    again = Store(store_url)  # a fresh engine reads what the first wrote
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


def test_non_finite_values_read_back_as_null(store_url: str) -> None:
    """An SLO line with no value in any window has a NaN mean; JSON (and PostgreSQL) has no NaN."""
    store = Store(store_url)
    exp = store.new_experiment("nan", {})
    slo = {"slo": {"0": [math.nan, math.nan], "1": [2.0, math.inf]}}
    store.add_trial(exp, StoredTrial(0, "bo", {"a": 1}, "completed", 1.0, 0.0, slo), 1.0, 2.0)
    store.update_experiment(exp, baseline={"objective": math.nan})
    (t,) = Store(store_url).trials(exp)
    assert t.metrics == {"slo": {"0": [None, None], "1": [2.0, None]}}
    assert store.experiment(exp).baseline == {"objective": None}  # type: ignore[union-attr]


def test_schema_is_the_models_at_the_newest_revision(store_url: str) -> None:
    store = Store(store_url)
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn)
        assert context.get_current_revision() == HEAD
        assert compare_metadata(context, Base.metadata) == []


OPEN_ON_GO = """
import sys
from xtune.trials.store import Store
print("ready", flush=True)
sys.stdin.readline()
Store(sys.argv[1])
"""


def test_processes_opening_a_new_store_at_once_make_it_once(store_url: str) -> None:
    """`xtune run` and `xtune dashboard` started together on a new store: neither fails."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_ON_GO, store_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for p in procs:  # all imported: release them together
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    assert Store(store_url).experiments() == []


def test_store_made_before_migrations_upgrades_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as old:  # the tables and rows as the code before migrations wrote them
        old.executescript((HERE / "store_before_migrations.sql").read_text())
        old.execute(
            "INSERT INTO experiments (id, name, config, created, baseline)"
            " VALUES (1, 'old', '{}', 1.0, '{\"objective\": 20.0}')"
        )
        trials = [
            (0, "bo", '{"a": 65536}', "completed", 12.5, 0.5, '{"slo": {"0": [1.0, 0.1]}}'),
            (1, "bo", '{"a": 1}', "infeasible", 99.0, None, '{"slo": {"0": [NaN, NaN]}}'),
        ]
        old.executemany(
            'INSERT INTO trials (experiment_id, "index", policy, params, status, objective, objective_sem,'
            " metrics, started, ended) VALUES (1, ?, ?, ?, ?, ?, ?, ?, 1.0, 2.0)",
            trials,
        )
    store = Store(f"sqlite:///{db}")
    got = store.trials(name="old")
    assert [(t.index, t.params, t.status, t.objective, t.objective_sem) for t in got] == [
        (0, {"a": 65536}, "completed", 12.5, 0.5),
        (1, {"a": 1}, "infeasible", 99.0, None),
    ]
    assert got[0].metrics == {"slo": {"0": [1.0, 0.1]}}
    assert all(math.isnan(x) for x in got[1].metrics["slo"]["0"])  # Python's JSON token, read as written
    with sqlite3.connect(db) as upgraded:
        assert upgraded.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
    store.add_trial(1, StoredTrial(2, "bo", {"a": 2}, "completed", 3.0, 0.1, {}), 3.0, 4.0)
    assert [t.index for t in Store(f"sqlite:///{db}").trials(1)] == [0, 1, 2]


def test_other_databases_are_refused_unchanged(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    before = foreign.read_bytes()
    with pytest.raises(StoreError, match=rf"{foreign}: not a trial store \(tables notes\)"):
        Store(f"sqlite:///{foreign}")
    assert foreign.read_bytes() == before

    newer = tmp_path / "newer.db"
    Store(f"sqlite:///{newer}")
    with sqlite3.connect(newer) as db:
        db.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreError, match=rf"{newer}: cannot upgrade the schema: .*9999"):
        Store(f"sqlite:///{newer}")


def test_a_store_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/trials"  # no server listens there
    with pytest.raises(StoreError, match=rf"^{url}: cannot open: .*refused"):
        Store(url)
    url = f"sqlite:///{tmp_path}/missing/trials.db"
    result = CliRunner().invoke(app, ["trials", "--db", url])
    assert result.exit_code == 1
    assert result.stderr == f"error: {url}: cannot open: unable to open database file\n"
    assert not (tmp_path / "missing").exists()


@pytest.mark.root
def test_postgres_restart_loses_no_committed_trial(pg_cluster: Cluster) -> None:
    """Committed is durable: a trial written before the server quits at once (as in a crash) is
    there after recovery, and the same store writes on through a new connection."""
    url = pg_cluster.create_database("restart")
    store = Store(url)
    exp = store.new_experiment("restart", {})
    first = StoredTrial(0, "bo", {"a": 1}, "completed", 1.0, 0.1, {})
    store.add_trial(exp, first, 1.0, 2.0)
    pg_cluster.stop("immediate")
    pg_cluster.start()
    second = StoredTrial(1, "bo", {"a": 2}, "completed", 2.0, 0.1, {})
    store.add_trial(exp, second, 2.0, 3.0)
    assert Store(url).trials(exp) == [first, second]

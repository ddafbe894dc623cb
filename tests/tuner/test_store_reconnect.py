"""A PostgreSQL store that loses its connection: a write whose commit reply was lost is stored once,
and a server that stays down ends the work with an error naming the store (no password) and what
was being done, leaving nothing half-written."""

from __future__ import annotations

import math
import os
import re
from typing import Any

import psycopg
import pytest
from xtune.testing.postgres import Cluster
from xtune.trials.store import Store, StoredTrial, StoreError

pytestmark = pytest.mark.root
# NaN is stored as null: a retried insert must know its own row by what was stored.
TRIAL = StoredTrial(0, "bo", {"a": 1}, "completed", 1.0, 0.1, {"slo": {"0": [1.0, math.nan]}})
STORED = StoredTrial(0, "bo", {"a": 1}, "completed", 1.0, 0.1, {"slo": {"0": [1.0, None]}})


def new_database(cluster: Cluster) -> str:
    return cluster.create_database(f"reconnect_{os.getpid()}_{os.urandom(4).hex()}")


@pytest.mark.parametrize("applied", [False, True], ids=["lost-before-commit", "reply-lost-after-commit"])
def test_a_write_whose_commit_failed_is_stored_once(
    pg_cluster: Cluster, monkeypatch: pytest.MonkeyPatch, applied: bool
) -> None:
    url = new_database(pg_cluster)
    store = Store(url)
    run = store.new_experiment("lost", {})
    dialect = store.engine.dialect
    commit = dialect.do_commit
    lost: list[bool] = []

    def commit_once_unanswered(pooled: Any) -> None:
        """The first commit's connection is lost before it is sent or before its reply comes."""
        if lost:
            return commit(pooled)
        lost.append(True)
        if applied:
            commit(pooled)
        pooled.dbapi_connection.close()  # what the client sees of a dropped connection
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(dialect, "do_commit", commit_once_unanswered)
    store.add_trial(run, TRIAL, 1.0, 2.0)
    assert lost  # the first commit did fail
    assert Store(url).trials(run) == [STORED]


def test_a_server_that_stays_down_ends_the_work_with_the_store_and_what_failed(pg_cluster: Cluster) -> None:
    url = new_database(pg_cluster)
    with_password = url.replace("postgres@", "postgres:secret@")  # trust auth: the password is unused
    store = Store(with_password, retry_s=1)
    run = store.new_experiment("down", {})
    shown = re.escape(url.replace("postgres@", "postgres:***@"))
    pg_cluster.stop()
    try:
        with pytest.raises(StoreError) as write:
            store.add_trial(run, TRIAL, 1.0, 2.0)
        message = str(write.value)
        expected = rf"{shown}: storing trial 0 of run {run} failed: "
        expected += r"no answer from the database server for 1 s \(.*refused"
        assert re.match(expected, message, re.IGNORECASE), message
        assert "secret" not in message
        with pytest.raises(StoreError, match=rf"^{shown}: reading the trials failed: no answer"):
            store.trials(run)
    finally:
        pg_cluster.start()
    assert store.trials(run) == []  # the write that failed left nothing
    store.add_trial(run, TRIAL, 1.0, 2.0)  # and the same store goes on once the server is back
    assert store.trials(run) == [STORED]

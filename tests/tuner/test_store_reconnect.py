"""A PostgreSQL store that loses its connection: a write whose commit reply was lost is stored once,
and a server that stays down ends the work with an error naming the store (no password) and what
was being done, leaving nothing half-written; `xtune run` meeting it says so and exits 1 with its
knob restored; connections carry TCP keepalives, so a silent peer is found."""

from __future__ import annotations

import math
import os
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from xtune import paths
from xtune.host import netns as host_netns
from xtune.host.services import free_port
from xtune.testing.postgres import Cluster
from xtune.testing.xrtd import Xrtd, sysctl_in
from xtune.trials.store import PG_KEEPALIVES, Store, StoredTrial, StoreError

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


# A grid of short trials in a throwaway namespace: the run writes to the store every fraction of a second.
RUN_SLO = """
name: test-store-lost
objective: {maximize: bench.score}
knobs:
  - {name: somaxconn, backend: sysctl, target: net.core.somaxconn, netns: "%s", range: [128, 8192]}
policy: {kind: grid, grid_points: 40, settle_ms: 0, windows: 1, baseline_windows: 2}
guard: {watch_windows: 1, violations: 1}
benchmark:
  command: ["sh", "-c", "sleep 0.2; echo '{\\"score\\": 1}'"]
  metrics: [{name: score, json: score}]
"""


def test_xtune_run_whose_store_stays_down_says_so_and_restores_its_knob(
    pg_cluster: Cluster, netns: str, tmp_path: Path, bin_dir: Path
) -> None:
    url = new_database(pg_cluster)
    store = Store(url)  # the schema is made before the run starts
    slo = tmp_path / "lost.yaml"
    slo.write_text(RUN_SLO % host_netns.path(netns))
    original = sysctl_in(netns, "net.core.somaxconn")
    xrtd = Xrtd(tmp_path).start()
    argv = [
        str(paths.ROOT / ".venv/bin/xtune"),
        "run",
        str(slo),
        "--db",
        url.replace("postgres@", "postgres:secret@"),
    ]
    argv += [
        "--xrtd-socket",
        xrtd.socket,
        "--metrics-addr",
        f"127.0.0.1:{free_port()}",
        "--store-retry-s",
        "1",
    ]
    run = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not store.trials():  # a trial stored: the run is writing
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.05)
        store.engine.dispose()
        pg_cluster.stop()
        try:
            out, err = run.communicate(timeout=120)
        finally:
            pg_cluster.start()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        xrtd.cleanup()
    shown = url.replace("postgres@", "postgres:***@")
    assert run.returncode == 1, out + err
    assert re.search(
        rf"^error: {re.escape(shown)}: .* failed: no answer from the database server for 1 s", err, re.M
    ), err
    assert "Traceback" not in err and "secret" not in out + err
    assert sysctl_in(netns, "net.core.somaxconn") == original  # restored on the way out


def test_connections_carry_tcp_keepalives(pg_cluster: Cluster) -> None:
    """libpq set them on the connection's own socket: a peer gone silent is found in seconds."""
    store = Store(new_database(pg_cluster))
    with store.engine.connect() as conn:
        fd = conn.connection.dbapi_connection.pgconn.socket  # type: ignore[union-attr]
        sock = socket.socket(fileno=os.dup(fd))
        try:
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert (
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == PG_KEEPALIVES["keepalives_idle"]
            )
            assert (
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL)
                == PG_KEEPALIVES["keepalives_interval"]
            )
            assert (
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == PG_KEEPALIVES["keepalives_count"]
            )
            assert (
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
                == PG_KEEPALIVES["tcp_user_timeout"]
            )
        finally:
            sock.close()

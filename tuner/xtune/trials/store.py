"""The trial store: experiments, trials, measurements, decisions and rollbacks.

SQLAlchemy over SQLite (`sqlite:///build/xtune-trials.db`, the default) or PostgreSQL
(`postgresql://user@host:port/db`, through psycopg). The schema is Alembic's (migrations/): opening
a store upgrades it to the newest revision; a store made before migrations is recognised by its
tables and upgraded in place.

Every read and write after opening is one transaction. On PostgreSQL, one that meets a lost
connection (the server restarted, or down for a while) is tried again, with a growing pause, for up
to `retry_s` seconds (30 by default; `xtune run --store-retry-s`), then fails with the store's URL
and what was being done. TCP keepalives find a connection whose peer went silent. A
retried insert first looks for the row it would write: a commit whose reply was lost may have been
applied, and is then not applied again. SQLite has no connection to lose: its errors are raised as they are.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import (
    JSON,
    Connection,
    Float,
    ForeignKey,
    Integer,
    String,
    create_engine,
    inspect,
    select,
    text,
)
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

MIGRATIONS = Path(__file__).with_name("migrations")
# The tables of a store made before migrations: that schema is revision 0001.
UNVERSIONED_TABLES = {"experiments", "trials", "measurements", "decisions", "rollbacks"}
# The advisory lock a PostgreSQL store's upgrade holds (SQLite's is the database's write lock).
PG_UPGRADE_LOCK = 0x78747374  # "xtst"
SQLITE_BUSY_S = 30.0
# A PostgreSQL server that has not accepted a connection in this long counts as out of reach
# (psycopg's default is 130 s, which would stretch one try past the whole retry bound).
PG_CONNECT_TIMEOUT_S = 10
# A connection whose peer went silent (a cut cable, a server host gone) is given up in about
# 30 s, not TCP's: keepalive probes after 10 s idle, every 5 s, 3 unanswered end it (a query
# waiting for its reply sends nothing: only probes find the peer gone); data sent and not
# acknowledged for 30 s ends it too (TCP_USER_TIMEOUT: else retransmissions go on for ~15 min).
# The retry then opens a new connection. libpq's parameters, passed through by psycopg.
PG_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}
# How long reads and writes are tried again on a lost PostgreSQL connection, and the pauses between.
RETRY_S = 30.0
RETRY_FIRST_PAUSE_S = 0.1
RETRY_MAX_PAUSE_S = 2.0
# Server states that end a connection but not the server: shut down by an administrator, crash
# recovery, and "starting up" / "shutting down" (SQLSTATE class 08 is every connection exception).
SERVER_DOWN_STATES = {"57P01", "57P02", "57P03"}

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R", bound="Base")


class StoreError(Exception):
    """A store that cannot be opened as a trial store, or whose server stayed out of reach, with
    the URL and the reason."""


def _finite_json(value: Any) -> Any:
    """NaN and infinities become null: JSON has no token for them (PostgreSQL refuses Python's
    `NaN`), and a store reads the same on every backend."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_json(v) for v in value]
    return value


def _json_dumps(value: Any) -> str:
    return json.dumps(_finite_json(value), allow_nan=False)


class Base(DeclarativeBase):
    pass


class Experiment(Base):
    __tablename__ = "experiments"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), index=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    created: Mapped[float] = mapped_column(Float)
    baseline: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # What a resumed run needs to rebuild its policy as it was (the SLO bounds it was made with);
    # the trials themselves, in index order, are the rest of it.
    policy_state: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class Trial(Base):
    __tablename__ = "trials"
    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    policy: Mapped[str] = mapped_column(String(64))  # `<policy>@<host>`
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))  # completed | infeasible | failed
    objective: Mapped[float | None] = mapped_column(Float, nullable=True)
    objective_sem: Mapped[float | None] = mapped_column(Float, nullable=True)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    started: Mapped[float] = mapped_column(Float)
    ended: Mapped[float] = mapped_column(Float)


class Measurement(Base):
    __tablename__ = "measurements"
    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), index=True)
    trial_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    phase: Mapped[str] = mapped_column(String(16))  # baseline | settle | measure | confirm | final
    t: Mapped[float] = mapped_column(Float)
    objective: Mapped[float | None] = mapped_column(Float, nullable=True)
    margins: Mapped[dict[str, float]] = mapped_column(JSON, default=dict)
    knobs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class DecisionRow(Base):
    __tablename__ = "decisions"
    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), index=True)
    t: Mapped[float] = mapped_column(Float)
    policy: Mapped[str] = mapped_column(String(64))  # `<policy>@<host>`
    values: Mapped[dict[str, Any]] = mapped_column(JSON)
    reason: Mapped[str] = mapped_column(String(256))


class RollbackRow(Base):
    __tablename__ = "rollbacks"
    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), index=True)
    trial_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    t: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(String(512))
    bad: Mapped[dict[str, Any]] = mapped_column(JSON)
    restored: Mapped[dict[str, Any]] = mapped_column(JSON)
    windows: Mapped[int] = mapped_column(Integer)


@dataclass(frozen=True)
class StoredTrial:
    index: int
    policy: str
    params: dict[str, Any]
    status: str
    objective: float | None
    objective_sem: float | None
    metrics: dict[str, Any]


def _same_row(s: Session, model: type[Base], values: dict[str, Any]) -> int | None:
    """The id of a row of `model` holding `values`, if there is one. JSON columns are compared as
    read back (PostgreSQL's json type has no equality), the others in the query."""
    columns = model.__table__.columns
    plain = {k: v for k, v in values.items() if not isinstance(columns[k].type, JSON)}
    stored = {k: json.loads(_json_dumps(v)) for k, v in values.items() if k not in plain}
    for row in s.scalars(select(model).filter_by(**plain)):
        if all(getattr(row, k) == v for k, v in stored.items()):
            return int(row.id)  # type: ignore[attr-defined]
    return None


def _upgrade(conn: Connection, where: str) -> None:
    """Bring the store on `conn` to the newest revision in one transaction that holds the store's
    write lock, so processes opening a new store at once make its tables once."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_UPGRADE_LOCK})
    elif conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # the driver would run DDL outside any transaction
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    tables = set(inspect(conn).get_table_names())
    if tables and "alembic_version" not in tables:
        if tables != UNVERSIONED_TABLES:
            raise StoreError(f"{where}: not a trial store (tables {', '.join(sorted(tables))})")
        command.stamp(config, "0001")
    try:
        command.upgrade(config, "head")
    except CommandError as e:  # e.g. a revision of a newer xtune
        raise StoreError(f"{where}: cannot upgrade the schema: {e}") from e


class Store:
    def __init__(self, url: str, retry_s: float = RETRY_S) -> None:
        self.url = url
        self.retry_s = retry_s
        # pre-ping: a connection the server dropped (PostgreSQL restarted) is replaced, not used.
        # SQLite: a writer waits for the file's lock up to 30 s (Python's default is 5): a run on
        # eight hosts writes from eight threads, and on a loaded machine 5 s was too short.
        if url.startswith("sqlite"):
            connect_args: dict[str, float] = {"timeout": SQLITE_BUSY_S}
        else:
            connect_args = {"connect_timeout": PG_CONNECT_TIMEOUT_S, **PG_KEEPALIVES}
        self.engine = create_engine(
            url, json_serializer=_json_dumps, pool_pre_ping=True, connect_args=connect_args
        )
        self.where = self.engine.url.render_as_string(hide_password=True)
        try:
            with self.engine.begin() as conn:
                _upgrade(conn, self.where)
        except OperationalError as e:  # no server there, no such database, a file that cannot be made
            raise StoreError(f"{self.where}: cannot open: {e.orig}") from e

    def _connection_lost(self, e: DBAPIError) -> bool:
        """Did `e` end the connection (so the same work may succeed on a new one)? Errors of the
        statement itself (a value too long, a deadlock, a cancelled query) are not retried."""
        if self.engine.dialect.name == "sqlite":
            return False
        if e.connection_invalidated:
            return True
        state = getattr(e.orig, "sqlstate", None)  # None: the client's own (refused, closed by peer)
        return isinstance(e, OperationalError) and (
            state is None or state.startswith("08") or state in SERVER_DOWN_STATES
        )

    def _retrying(self, what: str, work: Callable[[Session, bool], T]) -> T:
        """`work` in a session of its own (its transaction), again on a new connection while the
        server is out of reach, up to `retry_s`; its flag says whether an earlier try failed."""
        deadline = time.monotonic() + self.retry_s
        pause = RETRY_FIRST_PAUSE_S
        retried = False
        while True:
            try:
                with Session(self.engine, expire_on_commit=False) as s:
                    return work(s, retried)
            except DBAPIError as e:
                if not self._connection_lost(e):
                    raise
                reason = (str(e.orig).strip() or type(e.orig).__name__).splitlines()[0]
                if time.monotonic() + pause > deadline:
                    raise StoreError(
                        f"{self.where}: {what} failed: no answer from the database server"
                        f" for {self.retry_s:g} s ({reason})"
                    ) from e
                if not retried:
                    log.warning(
                        "%s: connection lost while %s (%s); trying again for up to %g s",
                        self.where,
                        what,
                        reason,
                        self.retry_s,
                    )
                time.sleep(pause)
                pause = min(2 * pause, RETRY_MAX_PAUSE_S)
                retried = True

    def _add(self, what: str, model: type[Base], values: dict[str, Any]) -> int:
        """Insert one row of `model` holding `values` and return its id. After a failed try the row
        is looked for first: a commit whose reply was lost may have been applied. Every row carries
        the time it was made (to the microsecond), so a row holding the same values is this one."""

        def insert(s: Session, retried: bool) -> int:
            if retried and (found := _same_row(s, model, values)) is not None:
                return found
            row = model(**values)
            s.add(row)
            s.commit()
            return int(row.id)  # type: ignore[attr-defined]

        return self._retrying(what, insert)

    def new_experiment(self, name: str, config: dict[str, Any]) -> int:
        values = {"name": name, "config": config, "created": time.time()}
        return self._add(f"storing a new run of {name}", Experiment, values)

    def update_experiment(self, experiment_id: int, **fields: Any) -> None:
        """Set `fields` of run `experiment_id` (setting them twice is setting them once)."""

        def update(s: Session, _retried: bool) -> None:
            row = s.get(Experiment, experiment_id)
            assert row is not None
            for key, value in fields.items():
                setattr(row, key, value)
            s.commit()

        self._retrying(f"updating run {experiment_id} ({', '.join(fields)})", update)

    def add_trial(self, experiment_id: int, trial: StoredTrial, started: float, ended: float) -> int:
        values = {
            "experiment_id": experiment_id,
            "index": trial.index,
            "policy": trial.policy,
            "params": trial.params,
            "status": trial.status,
            "objective": trial.objective,
            "objective_sem": trial.objective_sem,
            "metrics": trial.metrics,
            "started": started,
            "ended": ended,
        }
        return self._add(f"storing trial {trial.index} of run {experiment_id}", Trial, values)

    def add_measurement(
        self,
        experiment_id: int,
        phase: str,
        objective: float | None,
        margins: dict[str, float],
        knobs: dict[str, Any],
        trial_index: int | None = None,
    ) -> None:
        values = {
            "experiment_id": experiment_id,
            "trial_index": trial_index,
            "phase": phase,
            "t": time.time(),
            "objective": objective,
            "margins": margins,
            "knobs": knobs,
        }
        self._add(f"storing a {phase} window of run {experiment_id}", Measurement, values)

    def add_decision(self, experiment_id: int, policy: str, values: dict[str, Any], reason: str) -> None:
        row = {
            "experiment_id": experiment_id,
            "t": time.time(),
            "policy": policy,
            "values": values,
            "reason": reason[:256],
        }
        self._add(f"storing a decision of run {experiment_id}", DecisionRow, row)

    def add_rollback(
        self,
        experiment_id: int,
        trial_index: int | None,
        reason: str,
        bad: dict[str, Any],
        restored: dict[str, Any],
        windows: int,
    ) -> None:
        values = {
            "experiment_id": experiment_id,
            "trial_index": trial_index,
            "t": time.time(),
            "reason": reason[:512],
            "bad": bad,
            "restored": restored,
            "windows": windows,
        }
        self._add(f"storing a rollback of run {experiment_id}", RollbackRow, values)

    def experiments(self, name: str | None = None) -> list[Experiment]:
        q = select(Experiment).order_by(Experiment.id)
        if name is not None:
            q = q.where(Experiment.name == name)
        return self._retrying("reading the runs", lambda s, _retried: list(s.scalars(q)))

    def experiment(self, experiment_id: int) -> Experiment | None:
        return self._retrying(
            f"reading run {experiment_id}", lambda s, _retried: s.get(Experiment, experiment_id)
        )

    def trials(self, experiment_id: int | None = None, name: str | None = None) -> list[StoredTrial]:
        """Trials of one experiment run, or of every run with that experiment name."""
        q = select(Trial).order_by(Trial.id)
        if experiment_id is not None:
            q = q.where(Trial.experiment_id == experiment_id)
        if name is not None:
            q = q.join(Experiment, Experiment.id == Trial.experiment_id).where(Experiment.name == name)

        def read(s: Session, _retried: bool) -> list[StoredTrial]:
            return [
                StoredTrial(t.index, t.policy, t.params, t.status, t.objective, t.objective_sem, t.metrics)
                for t in s.scalars(q)
            ]

        return self._retrying("reading the trials", read)

    def _rows(self, model: type[R], what: str, experiment_id: int) -> list[R]:
        q = select(model).where(model.experiment_id == experiment_id)  # type: ignore[attr-defined]
        return self._retrying(f"reading the {what} of run {experiment_id}", lambda s, _r: list(s.scalars(q)))

    def measurements(self, experiment_id: int) -> list[Measurement]:
        return self._rows(Measurement, "windows", experiment_id)

    def decisions(self, experiment_id: int) -> list[DecisionRow]:
        return self._rows(DecisionRow, "decisions", experiment_id)

    def rollbacks(self, experiment_id: int) -> list[RollbackRow]:
        return self._rows(RollbackRow, "rollbacks", experiment_id)

"""The trial store: experiments, trials, measurements, decisions and rollbacks.

SQLAlchemy over SQLite (`sqlite:///build/xtune-trials.db`, the default) or PostgreSQL
(`postgresql://user@host:port/db`, through psycopg). The schema is Alembic's (migrations/): opening
a store upgrades it to the newest revision; a store made before migrations is recognised by its
tables and upgraded in place.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

MIGRATIONS = Path(__file__).with_name("migrations")
# The tables of a store made before migrations: that schema is revision 0001.
UNVERSIONED_TABLES = {"experiments", "trials", "measurements", "decisions", "rollbacks"}
# The advisory lock a PostgreSQL store's upgrade holds (SQLite's is the database's write lock).
PG_UPGRADE_LOCK = 0x78747374  # "xtst"
SQLITE_BUSY_S = 30.0


class StoreError(Exception):
    """A store that cannot be opened as a trial store, with the URL and the reason."""


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
    phase: Mapped[str] = mapped_column(String(16))  # baseline | settle | measure | final
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
    def __init__(self, url: str) -> None:
        self.url = url
        # pre-ping: a connection the server dropped (PostgreSQL restarted) is replaced, not used.
        # SQLite: a writer waits for the file's lock up to 30 s (Python's default is 5): a run on
        # eight hosts writes from eight threads, and on a loaded machine 5 s was too short.
        connect_args = {"timeout": SQLITE_BUSY_S} if url.startswith("sqlite") else {}
        self.engine = create_engine(
            url, json_serializer=_json_dumps, pool_pre_ping=True, connect_args=connect_args
        )
        where = self.engine.url.render_as_string(hide_password=True)
        try:
            with self.engine.begin() as conn:
                _upgrade(conn, where)
        except OperationalError as e:  # no server there, no such database, a file that cannot be made
            raise StoreError(f"{where}: cannot open: {e.orig}") from e

    def _add(self, row: Base) -> int:
        with Session(self.engine, expire_on_commit=False) as s:
            s.add(row)
            s.commit()
            return int(row.id)  # type: ignore[attr-defined]

    def new_experiment(self, name: str, config: dict[str, Any]) -> int:
        return self._add(Experiment(name=name, config=config, created=time.time()))

    def update_experiment(self, experiment_id: int, **fields: Any) -> None:
        with Session(self.engine) as s:
            row = s.get(Experiment, experiment_id)
            assert row is not None
            for key, value in fields.items():
                setattr(row, key, value)
            s.commit()

    def add_trial(self, experiment_id: int, trial: StoredTrial, started: float, ended: float) -> int:
        return self._add(
            Trial(
                experiment_id=experiment_id,
                index=trial.index,
                policy=trial.policy,
                params=trial.params,
                status=trial.status,
                objective=trial.objective,
                objective_sem=trial.objective_sem,
                metrics=trial.metrics,
                started=started,
                ended=ended,
            )
        )

    def add_measurement(
        self,
        experiment_id: int,
        phase: str,
        objective: float | None,
        margins: dict[str, float],
        knobs: dict[str, Any],
        trial_index: int | None = None,
    ) -> None:
        self._add(
            Measurement(
                experiment_id=experiment_id,
                trial_index=trial_index,
                phase=phase,
                t=time.time(),
                objective=objective,
                margins=margins,
                knobs=knobs,
            )
        )

    def add_decision(self, experiment_id: int, policy: str, values: dict[str, Any], reason: str) -> None:
        self._add(
            DecisionRow(
                experiment_id=experiment_id, t=time.time(), policy=policy, values=values, reason=reason[:256]
            )
        )

    def add_rollback(
        self,
        experiment_id: int,
        trial_index: int | None,
        reason: str,
        bad: dict[str, Any],
        restored: dict[str, Any],
        windows: int,
    ) -> None:
        self._add(
            RollbackRow(
                experiment_id=experiment_id,
                trial_index=trial_index,
                t=time.time(),
                reason=reason[:512],
                bad=bad,
                restored=restored,
                windows=windows,
            )
        )

    def experiments(self, name: str | None = None) -> list[Experiment]:
        with Session(self.engine) as s:
            q = select(Experiment).order_by(Experiment.id)
            if name is not None:
                q = q.where(Experiment.name == name)
            return list(s.scalars(q))

    def experiment(self, experiment_id: int) -> Experiment | None:
        with Session(self.engine) as s:
            return s.get(Experiment, experiment_id)

    def trials(self, experiment_id: int | None = None, name: str | None = None) -> list[StoredTrial]:
        """Trials of one experiment run, or of every run with that experiment name."""
        with Session(self.engine) as s:
            q = select(Trial).order_by(Trial.id)
            if experiment_id is not None:
                q = q.where(Trial.experiment_id == experiment_id)
            if name is not None:
                q = q.join(Experiment, Experiment.id == Trial.experiment_id).where(Experiment.name == name)
            return [
                StoredTrial(t.index, t.policy, t.params, t.status, t.objective, t.objective_sem, t.metrics)
                for t in s.scalars(q)
            ]

    def measurements(self, experiment_id: int) -> list[Measurement]:
        with Session(self.engine) as s:
            return list(s.scalars(select(Measurement).where(Measurement.experiment_id == experiment_id)))

    def decisions(self, experiment_id: int) -> list[DecisionRow]:
        with Session(self.engine) as s:
            return list(s.scalars(select(DecisionRow).where(DecisionRow.experiment_id == experiment_id)))

    def rollbacks(self, experiment_id: int) -> list[RollbackRow]:
        with Session(self.engine) as s:
            return list(s.scalars(select(RollbackRow).where(RollbackRow.experiment_id == experiment_id)))

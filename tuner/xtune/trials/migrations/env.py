"""Alembic's entry point for the trial store's schema.

`Store` runs it on its own connection (`config.attributes["connection"]`); the alembic command line
runs it on the store `-x db=URL` names (pyproject.toml's [tool.alembic] points the command here).
"""

from alembic import context
from sqlalchemy import Connection, create_engine
from xtune.trials.store import Base


def run(connection: Connection) -> None:
    # Batch operations: SQLite alters a table by copying it, and autogenerate should write them so.
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    run(connection)
else:
    url = context.get_x_argument(as_dictionary=True).get("db")
    if not url:
        raise SystemExit("alembic: name the trial store with -x db=URL")
    with create_engine(url).connect() as conn:
        run(conn)

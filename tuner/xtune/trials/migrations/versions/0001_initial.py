"""The trial store's first schema: the tables stores had before migrations (SQLAlchemy create_all).

Revision 0001, the first.
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _per_experiment(name: str, *columns: sa.Column) -> None:
    """A table of one experiment's rows, indexed by experiment."""
    op.create_table(
        name,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        *columns,
        sa.PrimaryKeyConstraint("id"),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"]),
    )
    op.create_index(f"ix_{name}_experiment_id", name, ["experiment_id"])


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("created", sa.Float(), nullable=False),
        sa.Column("baseline", sa.JSON(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_experiments_name", "experiments", ["name"])
    _per_experiment(
        "trials",
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("policy", sa.String(length=16), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("objective", sa.Float(), nullable=True),
        sa.Column("objective_sem", sa.Float(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("started", sa.Float(), nullable=False),
        sa.Column("ended", sa.Float(), nullable=False),
    )
    _per_experiment(
        "measurements",
        sa.Column("trial_index", sa.Integer(), nullable=True),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("t", sa.Float(), nullable=False),
        sa.Column("objective", sa.Float(), nullable=True),
        sa.Column("margins", sa.JSON(), nullable=False),
        sa.Column("knobs", sa.JSON(), nullable=False),
    )
    _per_experiment(
        "decisions",
        sa.Column("t", sa.Float(), nullable=False),
        sa.Column("policy", sa.String(length=16), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("reason", sa.String(length=256), nullable=False),
    )
    _per_experiment(
        "rollbacks",
        sa.Column("trial_index", sa.Integer(), nullable=True),
        sa.Column("t", sa.Float(), nullable=False),
        sa.Column("reason", sa.String(length=512), nullable=False),
        sa.Column("bad", sa.JSON(), nullable=False),
        sa.Column("restored", sa.JSON(), nullable=False),
        sa.Column("windows", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    for name in ("rollbacks", "decisions", "measurements", "trials", "experiments"):
        op.drop_table(name)

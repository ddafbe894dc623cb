"""trials.policy and decisions.policy up to 64 characters: a run on several hosts names its
trials' policy `<policy>@<host>`, and host names may have 32 (PostgreSQL refused them at 16).

Revision 0003, after 0002.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _policy_length(length: int) -> None:
    for table in ("trials", "decisions"):
        with op.batch_alter_table(table) as batch:  # SQLite alters a column by copying the table
            batch.alter_column("policy", type_=sa.String(length=length), existing_nullable=False)


def upgrade() -> None:
    _policy_length(64)


def downgrade() -> None:
    _policy_length(16)

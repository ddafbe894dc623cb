"""experiments.policy_state: what a resumed run needs to rebuild its policy (the SLO bounds).

Revision 0002, after 0001.
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("experiments", sa.Column("policy_state", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("experiments") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("policy_state")

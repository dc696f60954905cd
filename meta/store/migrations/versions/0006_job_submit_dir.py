"""jobs: the submit directory (the job runs there as its user, docs/identity.md §5)

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for older jobs and for callers that sent none: such jobs keep the daemon's working folder
    op.add_column("jobs", sa.Column("submit_dir", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "submit_dir")

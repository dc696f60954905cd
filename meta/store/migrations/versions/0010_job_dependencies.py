"""jobs: hold (sbatch --hold, metasched hold/release); dependencies and begin times live in the spec

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL: not held; "user" (JobHeldUser) or "admin" (JobHeldAdmin). A hold is state, not intent:
    # the spec says whether the job was submitted held, this column whether it is held now
    op.add_column("jobs", sa.Column("hold", sa.String(16), nullable=True))
    op.create_index("ix_jobs_hold", "jobs", ["hold"])


def downgrade() -> None:
    op.drop_index("ix_jobs_hold", table_name="jobs")
    op.drop_column("jobs", "hold")

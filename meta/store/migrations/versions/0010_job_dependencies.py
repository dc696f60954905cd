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
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = False
ONLINE_REASON = "jobs.hold (with dependencies and begin times in the spec): a leader of the version before ignores holds, dependencies and begin times and would start such jobs at once"


def upgrade() -> None:
    # NULL: not held; "user" (JobHeldUser) or "admin" (JobHeldAdmin). A hold is state, not intent:
    # the spec says whether the job was submitted held, this column whether it is held now
    op.add_column("jobs", sa.Column("hold", sa.String(16), nullable=True))
    op.create_index("ix_jobs_hold", "jobs", ["hold"])


def downgrade() -> None:
    op.drop_index("ix_jobs_hold", table_name="jobs")
    op.drop_column("jobs", "hold")

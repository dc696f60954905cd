"""jobs: an index on (submitted_at, id) so an admin's list reads its newest page without sorting every job

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "an index on jobs (not CONCURRENTLY: writes to jobs wait while it builds, seconds on a large store); older replicas never notice it"


def upgrade() -> None:
    op.create_index("ix_jobs_submitted_id", "jobs", ["submitted_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_submitted_id", table_name="jobs")

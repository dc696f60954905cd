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
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a nullable column stored at submit; no leader of that time read it (jobs ran in the daemon's folder either way)"


def upgrade() -> None:
    # NULL for older jobs and for callers that sent none: such jobs keep the daemon's working folder
    op.add_column("jobs", sa.Column("submit_dir", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "submit_dir")

"""jobs: the owner's uid and gid; tenants: where each setting comes from (Slurm or metasched)

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "nullable columns (jobs.owner_uid/owner_gid, tenants.sources); a job submitted through an older replica's API has no owner, as jobs from before it"


def upgrade() -> None:
    # NULL for jobs submitted before issue 12: they have no owner, so only coordinators and admins act on them
    op.add_column("jobs", sa.Column("owner_uid", sa.Integer(), nullable=True))
    op.add_column("jobs", sa.Column("owner_gid", sa.Integer(), nullable=True))
    # JSON {"weight": "slurm", "limits": "slurm", ...}; NULL or a missing key: set in metasched
    op.add_column("tenants", sa.Column("sources", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("tenants", "sources")
    op.drop_column("jobs", "owner_gid")
    op.drop_column("jobs", "owner_uid")

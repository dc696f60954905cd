"""tenants: each cluster's own association limits on a site of several clusters (synced from Slurm, issue 26)

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a nullable column (tenants.cluster_limits), NULL until a newer leader syncs it; an older leader holds every cluster to the tenant's limits, as before"


def upgrade() -> None:
    # JSON {"dev2": {"a100": 8, "*": 16}, ...}; NULL: tenants.limits hold on every cluster
    op.add_column("tenants", sa.Column("cluster_limits", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("tenants", "cluster_limits")

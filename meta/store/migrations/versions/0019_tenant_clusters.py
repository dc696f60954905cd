"""tenants: the Slurm clusters an admin confines a tenant to (``metasched tenant set --clusters``, issue 26)

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a nullable column (tenants.clusters), NULL until a newer replica's API sets it; an older leader places a tenant on any cluster, as before"


def upgrade() -> None:
    # JSON ["dev2", ...]; NULL: any cluster of the site
    op.add_column("tenants", sa.Column("clusters", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("tenants", "clusters")

"""tenants: the priority classes an admin allows a tenant's members to ask for (issue 21)

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a nullable column (tenants.priority_classes); an older replica's API does not check priority rights, as before"


def upgrade() -> None:
    # JSON ["inference-deadline", ...]; NULL: none beyond the job kind's own class and the association's QOS
    op.add_column("tenants", sa.Column("priority_classes", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("tenants", "priority_classes")

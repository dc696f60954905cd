"""inventory: the QOS names Slurm's accounting knows, for submit-time checks

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a nullable column (inventory.qos_names); NULL means not read yet, as older replicas leave it"


def upgrade() -> None:
    # NULL: not read yet (submit then checks no QOS, as before)
    op.add_column("inventory", sa.Column("qos_names", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("inventory", "qos_names")

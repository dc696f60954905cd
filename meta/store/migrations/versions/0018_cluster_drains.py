"""cluster_drains: Slurm clusters an admin drained from metasched's point of view (``metasched cluster drain``, issue 26)

One row per drained cluster: its name, the admin's reason, who drained it and when. The daemon's
step 7 gives the policy no node of a drained cluster (running work there finishes); ``metasched
cluster resume`` deletes the row. Written by ``meta/store/cluster_drains.py``.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a new table (cluster_drains), empty until a newer replica's API drains a cluster; an older leader only ignores drains until a newer one leads"


def upgrade() -> None:
    op.create_table(
        "cluster_drains",
        sa.Column("cluster", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("drained_by", sa.String(256), nullable=False),
        sa.Column("drained_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("cluster"),
    )


def downgrade() -> None:
    op.drop_table("cluster_drains")

"""site_identity: the store's metasched site id, which every Slurm job tag names (issue 26)

One row (``id`` = 1). The id is drawn at random the first time ``metasched serve`` or
``metasched db upgrade`` opens the store (``meta/store/site.py``), not here: a migration is
the same for every store, the id is each store's own.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a new table (site_identity) older replicas never read; they cannot read the newer job tags, so the lead must not go back to them once a newer replica led"


def upgrade() -> None:
    op.create_table(
        "site_identity",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("site_id", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        # one site per store: a second row could only be a mistake
        sa.CheckConstraint("id = 1", name="ck_site_identity_one_row"),
    )


def downgrade() -> None:
    op.drop_table("site_identity")

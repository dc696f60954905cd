"""reserved for array jobs (issue 13): no schema change yet

Revision ID: 0011
Revises: 0010
"""

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "no schema change"


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass

"""reserved for the decision log (issue 16): no schema change yet

Revision ID: 0009
Revises: 0008
"""

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass

"""reserved for dependencies, holds and begin times (issue 13): no schema change yet

Revision ID: 0010
Revises: 0009
"""

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass

"""reserved for per-tenant submit limits (issue 16): no schema change yet

Revision ID: 0013
Revises: 0012
"""

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass

"""reserved for plain-sbatch adoption (issue 13): no schema change yet

Revision ID: 0012
Revises: 0011
"""

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass

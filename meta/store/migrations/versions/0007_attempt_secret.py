"""attempts: the SHA-256 of the per-attempt secret a job proves itself with (docs/identity.md §5)

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL until the attempt is launched (and for attempts launched before this): no call can prove it
    op.add_column("attempts", sa.Column("secret_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("attempts", "secret_hash")

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
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = False
ONLINE_REASON = "attempts.secret_hash: a leader of the version before launches jobs as the daemon's user and without a secret, so jobs of the newer API would run as root and their commit/checkpoint calls be refused"


def upgrade() -> None:
    # NULL until the attempt is launched (and for attempts launched before this): no call can prove it
    op.add_column("attempts", sa.Column("secret_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("attempts", "secret_hash")

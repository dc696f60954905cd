"""tenants: submit limits (pending jobs per tenant and per user, submit rate) (issue 16)

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a nullable column (tenants.submit_limits); an older replica's API does not enforce those limits, as before"


def upgrade() -> None:
    # JSON {"max_pending": N, "max_pending_per_user": N, "users": {name: N}, "rate": R, "burst": N};
    # NULL or a missing key: no limit (the rate: the service's default). Which come from Slurm: ``sources``
    op.add_column("tenants", sa.Column("submit_limits", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("tenants", "submit_limits")

"""decision log (issue 16): each cycle's placements, preemptions and holds with the inputs that decided them

Append-only (a trigger refuses UPDATE); bounded: the leader deletes rows past the retention, in bulk.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a new table (decisions) with its indexes and trigger: older replicas never read or write it"


def upgrade() -> None:
    op.create_table(
        "decisions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("cycle", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=True),
        sa.Column("job_id", sa.String(length=36), nullable=True),
        sa.Column("tenant", sa.String(length=128), nullable=True),
        sa.Column("other_job", sa.String(length=36), nullable=True),
        sa.Column("record", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_decisions_kind_at", "decisions", ["kind", "at"])
    op.create_index("ix_decisions_at", "decisions", ["at"])  # the leader's prune by age, every minute
    op.create_index("ix_decisions_job", "decisions", ["job_id"])
    op.create_index("ix_decisions_other_job", "decisions", ["other_job"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE TRIGGER decisions_append_only BEFORE UPDATE ON decisions "
            "FOR EACH ROW EXECUTE FUNCTION metasched_write_once()"
        )
        return
    op.execute(
        "CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions "
        "BEGIN SELECT RAISE(ABORT, 'metasched: decisions rows are append-only'); END"
    )


def downgrade() -> None:
    op.drop_table("decisions")

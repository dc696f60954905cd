"""scheduling runtime: leader lease, reasons, usage, cycles, checkpoints, partition commits

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "new tables, nullable attempt columns and attempts.epoch with a constant default (metadata only on PostgreSQL >= 11); the version before had no daemon to run"


def upgrade() -> None:
    op.create_table(
        "cycles",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("inventory_version", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pending", sa.Integer(), nullable=False),
        sa.Column("placed", sa.Integer(), nullable=False),
        sa.Column("preempted", sa.Integer(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("fragmentation", sa.Text(), nullable=False),
        sa.Column("held", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "leader_lease",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=256), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "tenant_usage",
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("decayed_gpu_seconds", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant"],
            ["tenants.name"],
        ),
        sa.PrimaryKeyConstraint("tenant"),
    )
    op.create_table(
        "task_reasons",
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("cycle", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(length=64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("remedy", sa.Text(), nullable=False),
        sa.Column("blocking_job", sa.String(length=36), nullable=True),
        sa.Column("blocking_tenant", sa.String(length=128), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
        ),
        sa.PrimaryKeyConstraint("task_id"),
    )
    with op.batch_alter_table("task_reasons", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_task_reasons_job_id"), ["job_id"], unique=False)

    op.create_table(
        "checkpoints",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("attempt_id", sa.String(length=36), nullable=False),
        sa.Column("fencing_token", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
        ),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("checkpoints", schema=None) as batch_op:
        batch_op.create_index("ix_checkpoints_task_step", ["task_id", "step"], unique=False)

    op.create_table(
        "partition_commits",
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("attempt_id", sa.String(length=36), nullable=False),
        sa.Column("fencing_token", sa.Integer(), nullable=False),
        sa.Column("manifest", sa.Text(), nullable=False),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
        ),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
        ),
        sa.PrimaryKeyConstraint("task_id"),
    )
    with op.batch_alter_table("partition_commits", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_partition_commits_job_id"), ["job_id"], unique=False)

    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stop_reason", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("stop_signalled_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("launch_sent_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("epoch", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True))

    op.create_table(
        "inventory",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=32), nullable=False),
        sa.Column("nodes", sa.Text(), nullable=False),
        sa.Column("switch_parent", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    _write_once_commits()


def _write_once_commits() -> None:
    """A committed partition output is final: refuse UPDATE and DELETE from any client (I1)."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE TRIGGER partition_commits_write_once BEFORE UPDATE OR DELETE ON partition_commits "
            "FOR EACH ROW EXECUTE FUNCTION metasched_write_once()"
        )
        return
    for action in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER partition_commits_no_{action.lower()} BEFORE {action} ON partition_commits "
            "BEGIN SELECT RAISE(ABORT, 'metasched: partition_commits rows are write-once'); END"
        )


def downgrade() -> None:
    op.drop_table("inventory")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS partition_commits_write_once ON partition_commits")
    else:
        op.execute("DROP TRIGGER IF EXISTS partition_commits_no_update")
        op.execute("DROP TRIGGER IF EXISTS partition_commits_no_delete")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("last_seen_at")
        batch_op.drop_column("epoch")
        batch_op.drop_column("launch_sent_at")
        batch_op.drop_column("stop_signalled_at")
        batch_op.drop_column("stop_reason")

    with op.batch_alter_table("partition_commits", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_partition_commits_job_id"))

    op.drop_table("partition_commits")
    with op.batch_alter_table("checkpoints", schema=None) as batch_op:
        batch_op.drop_index("ix_checkpoints_task_step")

    op.drop_table("checkpoints")
    with op.batch_alter_table("task_reasons", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_task_reasons_job_id"))

    op.drop_table("task_reasons")
    op.drop_table("tenant_usage")
    op.drop_table("leader_lease")
    op.drop_table("cycles")

"""initial schema: tenants, queues, jobs with write-once specs, tasks, attempts, transitions

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = (
    "creates the first schema in an empty store: no replica of an older version can run against it"
)


def upgrade() -> None:
    op.create_table(
        "queues",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "tenants",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("guaranteed", sa.Text(), nullable=False),
        sa.Column("limits", sa.Text(), nullable=False),
        sa.Column("slurm_account", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "transitions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("entity", sa.String(length=16), nullable=False),
        sa.Column("entity_id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("stimulus_id", sa.String(length=200), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=False),
        sa.Column("to_state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("entity", "entity_id", "stimulus_id", name="uq_transitions_stimulus"),
    )
    with op.batch_alter_table("transitions", schema=None) as batch_op:
        batch_op.create_index("ix_transitions_entity", ["entity", "entity_id"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("short_id", sa.String(length=16), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("queue", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("priority_class", sa.String(length=32), nullable=False),
        sa.Column("idempotency_key", sa.String(length=256), nullable=True),
        sa.Column("submitted_by", sa.String(length=128), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["queue"],
            ["queues.name"],
        ),
        sa.ForeignKeyConstraint(
            ["tenant"],
            ["tenants.name"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("short_id"),
        sa.UniqueConstraint("tenant", "idempotency_key", name="uq_jobs_tenant_idempotency_key"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_tenant_submitted", ["tenant", "submitted_at"], unique=False)

    op.create_table(
        "job_specs",
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("spec_json", sa.Text(), nullable=False),
        sa.Column("spec_hash", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
        ),
        sa.PrimaryKeyConstraint("job_id"),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("fencing_counter", sa.Integer(), nullable=False),
        sa.Column("attempts_made", sa.Integer(), nullable=False),
        sa.Column("retry_base", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=True),
        sa.Column("avoid_nodes", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "index", name="uq_tasks_job_index"),
    )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index("ix_tasks_state", ["state"], unique=False)

    op.create_table(
        "attempts",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("fencing_token", sa.Integer(), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("placement", sa.Text(), nullable=False),
        sa.Column("slurm_job_id", sa.String(length=32), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("failure_category", sa.String(length=32), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
        ),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task_id", "fencing_token", name="uq_attempts_task_token"),
        sa.UniqueConstraint("task_id", "number", name="uq_attempts_task_number"),
    )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index("ix_attempts_slurm_job_id", ["slurm_job_id"], unique=False)
        batch_op.create_index("ix_attempts_state", ["state"], unique=False)
        batch_op.create_index(
            "uq_attempts_one_live_per_task",
            ["task_id"],
            unique=True,
            sqlite_where=sa.text(
                "state IN ('created', 'launch_unknown', 'launching', 'running', 'stopping')"
            ),
            postgresql_where=sa.text(
                "state IN ('created', 'launch_unknown', 'launching', 'running', 'stopping')"
            ),
        )

    _create_write_once_triggers()


# Columns of jobs that describe the submission and may never change after insert.
_JOB_FROZEN_COLUMNS = "id, short_id, tenant, queue, name, kind, priority_class, idempotency_key, submitted_at"


def _create_write_once_triggers() -> None:
    """Refuse UPDATE and DELETE of specs and history, and changes to a job's identity, from any client."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION metasched_write_once() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'metasched: % rows are write-once', TG_TABLE_NAME; END $$ LANGUAGE plpgsql"
        )
        for table in ("job_specs", "transitions"):
            op.execute(
                f"CREATE TRIGGER {table}_write_once BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION metasched_write_once()"
            )
        op.execute(
            f"CREATE TRIGGER jobs_identity_write_once BEFORE UPDATE OF {_JOB_FROZEN_COLUMNS} ON jobs "
            "FOR EACH ROW EXECUTE FUNCTION metasched_write_once()"
        )
        return
    for table in ("job_specs", "transitions"):
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'metasched: {table} rows are write-once'); END"
            )
    op.execute(
        f"CREATE TRIGGER jobs_identity_write_once BEFORE UPDATE OF {_JOB_FROZEN_COLUMNS} ON jobs "
        "BEGIN SELECT RAISE(ABORT, 'metasched: a job identity is write-once'); END"
    )


def _drop_write_once_triggers() -> None:
    """Remove the triggers created by _create_write_once_triggers."""
    if op.get_bind().dialect.name == "postgresql":
        for table in ("job_specs", "transitions"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_write_once ON {table}")
        op.execute("DROP TRIGGER IF EXISTS jobs_identity_write_once ON jobs")
        op.execute("DROP FUNCTION IF EXISTS metasched_write_once()")
        return
    for table in ("job_specs", "transitions"):
        for action in ("update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_{action}")
    op.execute("DROP TRIGGER IF EXISTS jobs_identity_write_once")


def downgrade() -> None:
    _drop_write_once_triggers()
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_attempts_one_live_per_task",
            sqlite_where=sa.text(
                "state IN ('created', 'launch_unknown', 'launching', 'running', 'stopping')"
            ),
            postgresql_where=sa.text(
                "state IN ('created', 'launch_unknown', 'launching', 'running', 'stopping')"
            ),
        )
        batch_op.drop_index("ix_attempts_state")
        batch_op.drop_index("ix_attempts_slurm_job_id")

    op.drop_table("attempts")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index("ix_tasks_state")

    op.drop_table("tasks")
    op.drop_table("job_specs")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_tenant_submitted")

    op.drop_table("jobs")
    with op.batch_alter_table("transitions", schema=None) as batch_op:
        batch_op.drop_index("ix_transitions_entity")

    op.drop_table("transitions")
    op.drop_table("tenants")
    op.drop_table("queues")

"""adopted_jobs: plain sbatch jobs metasched adopted from a managed partition, keyed by their Slurm job

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a new table (adopted_jobs): older replicas do not adopt, so held jobs of managed partitions only wait until a newer leader adopts them"


def upgrade() -> None:
    op.create_table(
        "adopted_jobs",
        sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id"), primary_key=True),
        sa.Column("slurm_job_id", sa.String(32), nullable=False),
        # Slurm reuses job ids after its state is wiped: the id and its submit time name one job
        sa.Column("slurm_submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("partition", sa.String(128), nullable=False),
        sa.Column("adopted_at", sa.DateTime(timezone=True), nullable=False),
        # a held job is adopted once, whichever replica or restart sees it (I4 for adoption)
        sa.UniqueConstraint("slurm_job_id", "slurm_submitted_at", name="uq_adopted_jobs_slurm_job"),
    )
    op.create_index("ix_adopted_jobs_slurm_job_id", "adopted_jobs", ["slurm_job_id"])


def downgrade() -> None:
    op.drop_index("ix_adopted_jobs_slurm_job_id", table_name="adopted_jobs")
    op.drop_table("adopted_jobs")

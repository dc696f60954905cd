"""plan_reports: saved capacity-planning reports (``plan calibrate|what-if|need --save``) and their PNG plots (issue 23)

``plan_reports`` holds one report per row: its kind, a name, who saved it and when, and the report
as ``--json`` prints it. ``plan_report_plots`` holds its PNGs, each marked with who may see it
(``cluster``: every figure of it is cluster-wide; ``admin``: it shows every tenant's delays).
Bounded by ``meta/store/plan_reports.py``: the newest 50 reports of each kind are kept.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "two new tables (plan_reports, plan_report_plots) that older replicas never read or write"


def upgrade() -> None:
    op.create_table(
        "plan_reports",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(256), nullable=False),
        sa.Column("report", sa.Text(), nullable=False),
        sa.Column("report_bytes", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_plan_reports_kind_id", "plan_reports", ["kind", "id"])
    op.create_table(
        "plan_report_plots",
        sa.Column("report_id", sa.Integer(), sa.ForeignKey("plan_reports.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("audience", sa.String(16), nullable=False),
        sa.Column("png", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("report_id", "name"),
    )


def downgrade() -> None:
    op.drop_table("plan_report_plots")
    op.drop_index("ix_plan_reports_kind_id", table_name="plan_reports")
    op.drop_table("plan_reports")

"""audit events: an admin's prune by age is the one deliberate exception to append-only (issue 22, S9)

A DELETE of ``audit_events`` rows is refused unless the deleting transaction holds a row in
``audit_prune_permits``: ``meta.store.audit.prune`` inserts one, deletes the old rows, records
who pruned what and removes the permit, all in one transaction. Another transaction never sees
an uncommitted permit (PostgreSQL's MVCC; SQLite has one writer), so nothing else may delete.
UPDATE stays refused. This guards against mistakes and bugs, not against the database's owner.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a new table (audit_prune_permits) and audit_events' trigger swapped in one transaction: older replicas only insert audit rows, still allowed"

_REFUSED = "metasched: audit_events rows are write-once (an admin prunes with metasched audit prune)"


def upgrade() -> None:
    op.create_table(
        "audit_prune_permits",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("actor", sa.String(length=256), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION metasched_audit_write_once() RETURNS trigger AS $$ BEGIN "
            "IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM audit_prune_permits) THEN RETURN OLD; END IF; "
            f"RAISE EXCEPTION '{_REFUSED}'; END $$ LANGUAGE plpgsql"
        )
        op.execute("DROP TRIGGER audit_events_write_once ON audit_events")
        op.execute(
            "CREATE TRIGGER audit_events_write_once BEFORE UPDATE OR DELETE ON audit_events "
            "FOR EACH ROW EXECUTE FUNCTION metasched_audit_write_once()"
        )
        return
    op.execute("DROP TRIGGER audit_events_no_delete")
    op.execute(
        "CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events "
        "WHEN NOT EXISTS (SELECT 1 FROM audit_prune_permits) "
        f"BEGIN SELECT RAISE(ABORT, '{_REFUSED}'); END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER audit_events_write_once ON audit_events")
        op.execute(
            "CREATE TRIGGER audit_events_write_once BEFORE UPDATE OR DELETE ON audit_events "
            "FOR EACH ROW EXECUTE FUNCTION metasched_write_once()"
        )
        op.execute("DROP FUNCTION metasched_audit_write_once()")
    else:
        op.execute("DROP TRIGGER audit_events_no_delete")
        op.execute(
            "CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events "
            "BEGIN SELECT RAISE(ABORT, 'metasched: audit_events rows are write-once'); END"
        )
    op.drop_table("audit_prune_permits")

"""store_changes: a row per write to what the scheduler reads, so an idle period knows nothing changed (issue 24)

Triggers on the tables the cycle's snapshot, gates and policy read log that a statement changed
rows; the leader deletes what it finds each period (``meta/store/changes.py``) and, when nothing
was there and nothing else it reads changed, reuses its last pass instead of reading 50,000
waiting tasks again. On PostgreSQL a statement-level trigger logs once per transaction (a
transaction-local setting remembers it logged) and only when the statement touched rows; on
SQLite (one writer at a time) a row-level trigger keeps a single row.

Revision ID: 0021
Revises: 0020
"""

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None
# rolling upgrades (docs/upgrades.md): may `metasched db upgrade` apply this while replicas of the
# version before still run? Expand only (new tables, nullable columns, ...) is; a change older
# replicas would misread or that changes what stored data means is not.
ONLINE_SAFE = True
ONLINE_REASON = "a new table filled by triggers; older replicas never read it, their writes only add a row per transaction"

# what the cycle's steps 7 to 9 read; tables it writes every period whatever changed (the lease,
# usage, reasons, cycles, decisions, audit) are not here, or no period would ever be quiet
WATCHED = ("tenants", "queues", "jobs", "tasks", "attempts", "adopted_jobs", "checkpoints", "inventory",
           "cluster_drains")
EVENTS = ("insert", "update", "delete")

_PG_FUNCTION = """
CREATE FUNCTION metasched_log_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- once per transaction: the leader only asks whether anything changed, not what
    IF current_setting('metasched.changed', true) IS DISTINCT FROM txid_current()::text
       AND EXISTS (SELECT 1 FROM changed_rows) THEN
        INSERT INTO store_changes DEFAULT VALUES;
        PERFORM set_config('metasched.changed', txid_current()::text, true);
    END IF;
    RETURN NULL;
END $$
"""


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute("CREATE TABLE store_changes (id BIGSERIAL PRIMARY KEY)")
        op.execute(_PG_FUNCTION)
        for table in WATCHED:
            for event in EVENTS:
                rows = "OLD TABLE" if event == "delete" else "NEW TABLE"
                op.execute(f"CREATE TRIGGER {table}_{event}_logged AFTER {event.upper()} ON {table} "
                           f"REFERENCING {rows} AS changed_rows FOR EACH STATEMENT "
                           "EXECUTE FUNCTION metasched_log_change()")  # fmt: skip
        return
    op.execute("CREATE TABLE store_changes (id INTEGER PRIMARY KEY)")
    for table in WATCHED:
        for event in EVENTS:
            op.execute(f"CREATE TRIGGER {table}_{event}_logged AFTER {event.upper()} ON {table} "
                       "BEGIN INSERT OR REPLACE INTO store_changes (id) VALUES (1); END")  # fmt: skip


def downgrade() -> None:
    for table in WATCHED:
        for event in EVENTS:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_{event}_logged" + (
                f" ON {table}" if op.get_bind().dialect.name == "postgresql" else ""))
    op.execute("DROP TABLE store_changes")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION metasched_log_change()")

"""truncate_all: empty every metasched table of a PostgreSQL store (tests and benchmarks start from it)."""

from __future__ import annotations

from sqlalchemy import text

from meta.store.db import Database

# children before parents is not needed (CASCADE), but every table the migrations create is named:
# a table missing here would carry rows from one test or benchmark run into the next — except
# ``site_identity``, kept on purpose: the store stays the same metasched site, so Slurm jobs an
# earlier run left behind are still its own orphans (cancelled), not another site's (left alone)
TABLES = (
    "audit_events",
    "audit_prune_permits",
    "decisions",
    "inventory",
    "partition_commits",
    "checkpoints",
    "task_reasons",
    "cycles",
    "leader_lease",
    "tenant_usage",
    "transitions",
    "attempts",
    "tasks",
    "job_specs",
    "jobs",
    "queues",
    "tenants",
    "plan_report_plots",
    "plan_reports",
    "cluster_drains",
    "store_changes",
)


def truncate_all(database: Database) -> None:
    """truncate_all empties every metasched table of a PostgreSQL store (tests and benchmarks)."""
    with database.engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {', '.join(TABLES)} CASCADE"))

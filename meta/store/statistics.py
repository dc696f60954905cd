"""Planner statistics after a bulk insert: PostgreSQL re-samples the tasks table at once, not when autovacuum wakes.

After one request added 20,000 tasks, PostgreSQL still planned with the table's old statistics:
the daemon's read of the new tasks by id became a nested loop over every task of the job, about
1 s per 1,000 ids, and one period took 7-25 s until autoanalyze ran (issue 22,
``benchmarks/bench_hostile.py`` S4 on PostgreSQL). ``ANALYZE`` samples a bounded number of rows
(a fraction of a second at 100,000 tasks), so a request that adds many tasks pays it once.
SQLite plans without such statistics: nothing to do there.
"""

from __future__ import annotations

from sqlalchemy import text

from meta.store.db import Database

ANALYZE_AFTER_TASKS = 5_000  # a request adding this many tasks refreshes the statistics
ANALYZED_TABLES = ("tasks", "jobs", "job_specs")  # what the daemon's reads of new work join


def refresh_after_insert(db: Database, tasks_added: int) -> bool:
    """refresh_after_insert runs ANALYZE on the work tables when ``tasks_added`` is large (PostgreSQL); True if it did."""
    if tasks_added < ANALYZE_AFTER_TASKS or db.engine.dialect.name != "postgresql":
        return False
    with db.engine.connect() as connection:
        connection.execute(text("ANALYZE " + ", ".join(ANALYZED_TABLES)))
        connection.commit()
    return True

"""The decision log's rows: appended in bulk each cycle, pruned in bulk by age and by count.

Rows are append-only (an ORM guard and a database trigger refuse UPDATE); only ``prune`` deletes,
oldest first, so the log stays bounded by the retention the leader was started with.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from meta.store.bulk_insert import insert_sharing
from meta.store.models import DecisionRow

COLUMNS = ("kind", "task_id", "job_id", "tenant", "other_job", "record")


def append(session: Session, rows: Sequence[dict[str, Any]], *, cycle: int, at: datetime, epoch: int) -> int:
    """append inserts one cycle's rows (each: kind, task_id, job_id, tenant, other_job, record) in one statement.

    The record is encoded here once per row, as the JSON column would, and the rows go to the
    driver directly (COPY on PostgreSQL): the per-row cost is the JSON text, nothing else.
    """
    encoded = [
        {**{c: row.get(c) for c in COLUMNS[:-1]}, "record": json.dumps(row["record"], sort_keys=True,
                                                                       separators=(",", ":"))}
        for row in rows
    ]
    insert_sharing(session, DecisionRow.__table__, encoded, {"cycle": cycle, "at": at, "epoch": epoch})
    return len(encoded)


def prune(session: Session, now: datetime, *, max_age_s: float | None, max_rows: int | None) -> int:
    """prune deletes rows older than ``max_age_s`` and all but the newest ``max_rows`` (two statements at most)."""
    deleted = 0
    if max_age_s is not None:
        cutoff = now - timedelta(seconds=max_age_s)
        deleted += session.execute(delete(DecisionRow).where(DecisionRow.at < cutoff)).rowcount or 0
    if max_rows is not None:
        newest = session.scalar(select(func.max(DecisionRow.id)))
        if newest is not None and newest > max_rows:
            # ids only grow: keeping ids above newest - max_rows keeps at most max_rows rows
            deleted += session.execute(delete(DecisionRow).where(DecisionRow.id <= newest - max_rows)).rowcount or 0
    return deleted

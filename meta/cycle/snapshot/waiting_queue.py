"""For step 7 (snapshot), the waiting queue: each waiting task's key and place, kept between periods on PostgreSQL.

The pending view needs, each period, every waiting task's key (what would change its
description) in queue order. Reading those 50,000 rows again each period was most of a
snapshot; on PostgreSQL the leader instead reads only the rows written since its last read.
Every row version carries the id of the transaction that wrote it (``xmin``); all transactions
older than a statement's snapshot ``xmin`` had ended when it ran, so a row this read did not see
was written by a transaction at least that new. The next read asks for tasks (and jobs) whose
``xmin`` is that new or newer (``age()`` compares them across wraparound) — it may see a row
again, never miss one. A task that left the queue shows up the same way (its state or its job's
cancel changed); a deleted one does not, so the queue's size is checked against a count, and a
mismatch, a new leader or SQLite reads the queue in full.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Text, func, literal_column, or_, select, type_coerce
from sqlalchemy.orm import Session

from meta.model.states import TaskState
from meta.store.models import Job, Task

Key = tuple[Any, ...]  # (version, avoid_nodes as stored, priority class): what would change a description
Place = tuple[datetime, int, str]  # (submitted, index, task id): the queue's order

_COLUMNS = (Task.id, Task.version, type_coerce(Task.avoid_nodes, Text), Job.priority_class, Job.submitted_at,
            Task.index, Task.not_before, Job.tenant)  # fmt: skip
WAITING = (Task.state == TaskState.PENDING.value, Job.cancel_requested.is_(False))  # a waiting task (tasks joined to jobs)
# the oldest transaction the statement's snapshot may not have seen: rows newer than it are read again
_HORIZON = select(func.pg_snapshot_xmin(func.pg_current_snapshot()).cast(Text))


def _newer(table: str, horizon: Any) -> Any:
    """_newer: the table's row was written by a transaction as new as ``horizon`` or newer."""
    return func.age(literal_column(f"{table}.xmin")) <= func.age(horizon)


@dataclass
class Waiting:
    """Waiting is one waiting task as the queue keeps it."""

    key: Key
    place: Place
    not_before: datetime | None  # a retry's backoff: not eligible before this
    tenant: str


class WaitingQueue:
    """WaitingQueue is every waiting task's key and place, kept up to date from the rows written since the last read."""

    def __init__(self) -> None:
        self._tasks: dict[str, Waiting] = {}
        self._order: list[Place] = []
        self._horizon: str | None = None  # the last read's snapshot xmin (None: read in full next)
        self.changed_rows = -1  # rows the last read took (-1: it read the queue in full)
        self._depth: Counter[str] = Counter()  # waiting tasks per tenant, eligible or not

    def read(self, session: Session, moment: datetime) -> dict[str, Key]:
        """read is the key of every task waiting and eligible at ``moment``, in queue order."""
        postgres = session.get_bind().dialect.name == "postgresql"
        horizon = session.scalar(_HORIZON) if postgres else None
        if self._horizon is None or not self._follow(session, self._horizon):
            self._load(session)
        self._horizon = horizon  # taken before this read: whatever it missed is newer
        tasks = self._tasks
        return {
            place[2]: waiting.key
            for place in self._order
            if (waiting := tasks[place[2]]).not_before is None or waiting.not_before <= moment
        }

    def depth(self) -> dict[str, int]:
        """depth is the number of waiting tasks per tenant at the last read, eligible or not (the queue-depth gauge)."""
        return {tenant: count for tenant, count in self._depth.items() if count > 0}

    def _load(self, session: Session) -> None:
        """_load reads every waiting task (one statement, in queue order)."""
        rows = session.execute(select(*_COLUMNS).join(Job, Job.id == Task.job_id).where(*WAITING)).all()
        self._tasks = {row[0]: _waiting(row) for row in rows}
        self._depth = Counter(waiting.tenant for waiting in self._tasks.values())
        self._order = sorted(waiting.place for waiting in self._tasks.values())
        self.changed_rows = -1

    def _follow(self, session: Session, horizon: str) -> bool:
        """_follow takes the rows written since ``horizon``; False when the queue must be read in full."""
        since = literal_column(f"CAST('{_modulo(horizon)}' AS xid)")  # an int: nothing of a caller's in the text
        rows = session.execute(
            select(*_COLUMNS, Task.state, Job.cancel_requested)
            .join(Job, Job.id == Task.job_id)
            .where(or_(_newer("tasks", since), _newer("jobs", since)))
        ).all()
        removed: set[str] = set()
        for row in rows:
            task_id, state, cancel_requested = row[0], row[8], row[9]
            if state == TaskState.PENDING.value and not cancel_requested:
                self._put(task_id, _waiting(row))
            elif (gone := self._tasks.pop(task_id, None)) is not None:
                removed.add(task_id)
                self._depth[gone.tenant] -= 1
        if removed:
            self._order = [place for place in self._order if place[2] not in removed]
        self.changed_rows = len(rows)
        count = session.scalar(select(func.count()).select_from(Task).join(Job, Job.id == Task.job_id).where(*WAITING))
        return count == len(self._tasks)

    def _put(self, task_id: str, waiting: Waiting) -> None:
        """_put adds a task or updates its key (a task's place never changes)."""
        if task_id not in self._tasks:
            bisect.insort(self._order, waiting.place)
            self._depth[waiting.tenant] += 1
        self._tasks[task_id] = waiting


def _modulo(horizon: str) -> int:
    """_modulo is a 64-bit transaction id as the 32-bit ``xid`` rows carry (its epoch dropped)."""
    return int(horizon) % 2**32


def _waiting(row: Any) -> Waiting:
    """_waiting is a task's entry from a row of ``_COLUMNS``."""
    task_id, version, avoid, priority, submitted, index, not_before, tenant = row[:8]
    return Waiting((version, avoid, priority), (submitted, index, task_id), not_before, tenant)

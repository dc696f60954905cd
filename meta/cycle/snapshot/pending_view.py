"""Cycle step 7 (snapshot), the waiting tasks: the leader keeps each one's description and rebuilds only what changed.

Loading every waiting task and its job through the ORM each period made the snapshot grow by
tens of microseconds per waiting task. The view takes each waiting task's key (version, the
fields that shape its description) from the waiting queue (``waiting_queue.py``: on PostgreSQL
only the rows written since the last read) and loads full rows only for tasks it has not
described yet or whose row changed. A task's version moves with every write to it, and a job's
spec never changes, so an unchanged key means an unchanged description; the store stays the
truth, and a new leader simply starts with an empty view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from meta.cycle.snapshot.facts import JOB_FACTS, TASK_FACTS, read_jobs
from meta.cycle.snapshot.waiting_queue import WAITING, WaitingQueue
from meta.model.errors import JOB_FAULTS
from meta.model.states import TaskState
from meta.policy.snapshot import PendingTask
from meta.store.chunks import among, chunked
from meta.store.models import Job, JobSpecRow, Task

_WHOLE_QUEUE_FROM = 2000  # tasks to describe from which reading the whole queue may pay
Describe = Callable[[Row[Any], Row[Any]], PendingTask]  # (job facts, task facts): rows of facts.py's columns


class PendingView:
    """PendingView is the leader's PendingTask per waiting task, keyed by what would change it."""

    def __init__(self) -> None:
        self._described: dict[str, tuple[tuple[Any, ...], PendingTask]] = {}
        self.rebuilt = 0  # descriptions built in the last read (the rest were reused)
        self.queue = WaitingQueue()  # every waiting task's key, in order (kept between reads on PostgreSQL)

    def read(
        self, session: Session, moment: datetime, describe: Describe, quarantine: list[tuple[str, Exception]] | None
    ) -> list[PendingTask]:
        """read returns the waiting tasks eligible at ``moment`` in queue order (submit time, index, id)."""
        keys = self.queue.read(session, moment)
        old = self._described
        stale = [t for t, key in keys.items() if t not in old or old[t][0] != key]
        fresh = self._describe(session, stale, keys, describe, quarantine)
        stale_set = set(stale)
        # kept: unchanged tasks; fresh: new or changed ones described now; gone: every other entry
        self._described = {t: fresh[t] if t in fresh else old[t] for t in keys if t in fresh or t not in stale_set}
        self.rebuilt = len(fresh)
        return [self._described[t][1] for t in keys if t in self._described]

    def _describe(
        self,
        session: Session,
        task_ids: list[str],
        keys: dict[str, tuple[Any, ...]],
        describe: Describe,
        quarantine: list[tuple[str, Exception]] | None,
    ) -> dict[str, tuple[tuple[Any, ...], PendingTask]]:
        """_describe reads the facts of ``task_ids`` and of their jobs (each job once) and describes each task."""
        described: dict[str, tuple[tuple[Any, ...], PendingTask]] = {}
        for tasks, jobs in _facts(session, task_ids, len(keys)):
            for task in tasks:
                try:
                    described[task.id] = (keys[task.id], describe(jobs[task.job_id], task))
                except JOB_FAULTS as exc:  # this job's data, not the cycle's: the caller quarantines it
                    if quarantine is not None:
                        quarantine.append((task.id, exc))
        return described


def _facts(session: Session, task_ids: list[str], waiting: int) -> Iterator[tuple[list[Row[Any]], dict[str, Row[Any]]]]:
    """_facts yields the facts of ``task_ids`` with their jobs' — the whole queue at once when most of it is asked.

    A new leader asks for every waiting task: two statements over the waiting rows then beat a
    hundred ``IN`` lists of a thousand ids each, whose parameters alone cost a second at 100,000
    (issue 24: failover). Otherwise the tasks are read in slices, each job once.
    """
    if len(task_ids) >= _WHOLE_QUEUE_FROM and 2 * len(task_ids) >= waiting:
        wanted = set(task_ids)
        rows = session.execute(select(*TASK_FACTS).join(Job, Job.id == Task.job_id).where(*WAITING))
        tasks = [task for task in rows if task.id in wanted]
        queued = select(Task.job_id).where(Task.state == TaskState.PENDING.value)
        query = select(*JOB_FACTS).join(JobSpecRow, JobSpecRow.job_id == Job.id).where(Job.id.in_(queued))
        yield tasks, {job.id: job for job in session.execute(query)}
        return
    jobs: dict[str, Row[Any]] = {}
    for chunk in chunked(task_ids):
        tasks = session.execute(select(*TASK_FACTS).where(among(session, Task.id, chunk))).all()
        read_jobs(session, (task.job_id for task in tasks), jobs)
        yield list(tasks), jobs

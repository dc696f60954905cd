"""Why a job's tasks wait: each task's typed reason (``metasched explain``).

The leader stores a reason only when it changes, so a row's ``cycle`` and ``at`` say since when
the reason has held (the SINCE column), not when it was last confirmed.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.model.errors import INVALID_SPEC
from meta.store.models import Job, Task, TaskReason


def explain_job(session: Session, job_id: str, short_id: str, state: str) -> dict[str, Any]:
    """explain_job is one line per task: its typed reason (or why none applies) and what would help."""
    rows = session.execute(
        select(Task.index, Task.name, Task.state, Task.reason, TaskReason)
        .outerjoin(TaskReason, TaskReason.task_id == Task.id)
        .where(Task.job_id == job_id)
        .order_by(Task.index)
    ).all()
    blocking = {
        r.blocking_job: short
        for *_, r in rows
        if r is not None and r.blocking_job
        for short in session.scalars(select(Job.short_id).where(Job.id == r.blocking_job))
    }
    items = [_item(index, name, task_state, task_reason, reason, blocking)
             for index, name, task_state, task_reason, reason in rows]
    return {"job": short_id, "state": state, "tasks": items}


def _item(
    index: int, name: str, task_state: str, task_reason: str | None, reason: TaskReason | None, blocking: dict
) -> dict[str, Any]:
    """_item is one task's line: the last cycle's typed reason, or why it will never run."""
    if task_reason and task_reason.startswith(f"{INVALID_SPEC}:"):
        # quarantined: its own data broke a step of the cycle; no later cycle looks at it again
        return {"task": index, "name": name, "state": task_state, "code": INVALID_SPEC,
                "message": task_reason.removeprefix(f"{INVALID_SPEC}:").strip(),
                "remedy": "fix the job file and submit it again (a quarantined job is never retried)",
                "blocking_job": None, "blocking_tenant": None, "cycle": None, "at": None}
    return {
        "task": index,
        "name": name,
        "state": task_state,
        "code": reason.code if reason else None,
        "message": reason.message if reason else _no_reason(task_state),
        "remedy": reason.remedy if reason else "",
        "blocking_job": blocking.get(reason.blocking_job, reason.blocking_job) if reason else None,
        "blocking_tenant": reason.blocking_tenant if reason else None,
        "cycle": reason.cycle if reason else None,
        "at": reason.at.isoformat() if reason else None,
    }


def _no_reason(task_state: str) -> str:
    if task_state == "pending":
        return "no scheduling cycle has considered it yet (is `metasched serve` running?)"
    return f"not waiting ({task_state})"

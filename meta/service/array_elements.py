"""Array elements addressed as Slurm users do: ``JOB_3``, ``JOB_[1-3,5]`` (``JOB`` alone is the whole job).

An array job's tasks are its elements, named by their index, so an element id picks tasks by
name. ``status`` and ``explain`` of an element id show only those elements; ``cancel`` ends
only them (a waiting element at once, a launched one through scancel, as for a whole job); the
job's state stays the one its elements' states add up to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.model.arrays import ElementRef, element_id
from meta.model.errors import InvalidRequest, NotFound
from meta.model.states import TaskState
from meta.store import audit
from meta.store.lifecycle import cancel_attempt, job_spec, live_attempt
from meta.store.models import Job, Task
from meta.store.transitions import transition_task


def element_tasks(session: Session, job: Job, element: ElementRef) -> list[Task]:
    """element_tasks are the tasks an element id names; NotFound when none of its indexes exists."""
    assert element.indexes is not None
    names = [str(index) for index in element.indexes]
    tasks = list(session.scalars(select(Task).where(Task.job_id == job.id, Task.name.in_(names)).order_by(Task.index)))
    if not tasks:
        raise NotFound(f"job {element_id(job.short_id, element.indexes[0])} not found")
    return tasks


def cancel_elements(session: Session, job: Job, element: ElementRef, actor: str) -> list[Task]:
    """cancel_elements ends the named elements of an array job (idempotent per element) and audits it."""
    if not _is_array(session, job):
        raise InvalidRequest(f"job {job.short_id} is not an array; cancel {job.short_id} itself")
    tasks = element_tasks(session, job, element)
    ended = []
    for task in tasks:
        state = TaskState(task.state)
        if state == TaskState.PENDING:
            transition_task(session, task.id, TaskState.CANCELLED, f"cancel-element:{task.id}:{task.version}",
                            reason="cancelled by user", actor=actor)  # fmt: skip
            ended.append(task)
            continue
        attempt = live_attempt(session, task.id)
        if attempt is not None and not attempt.cancel_requested:
            cancel_attempt(session, attempt, f"cancel-element:{task.id}:{task.version}", actor)
            ended.append(task)
    if ended:
        audit.record(session, actor, "job.cancel", job.short_id, tenant=job.tenant,
                     elements=[int(t.name) for t in ended])  # fmt: skip
    return tasks


def only_elements(view: dict[str, Any], element: ElementRef) -> dict[str, Any]:
    """only_elements keeps the named elements in a status (``task_list``) or explain (``tasks``) answer."""
    if element.indexes is None:
        return view
    names = {str(index) for index in element.indexes}
    key = "task_list" if "task_list" in view else "tasks"
    tasks: Sequence[dict[str, Any]] = view.get(key) or []
    kept = [task for task in tasks if str(task.get("name")) in names]
    if not kept:
        raise NotFound(f"job {element_id(element.job, element.indexes[0])} not found")
    return {**view, key: kept}


def _is_array(session: Session, job: Job) -> bool:
    """_is_array tells whether the job was submitted as an array (its tasks are named by index)."""
    return job_spec(session, job.id).array is not None

"""``metasched explain JOB``: why each of a job's tasks waits, from the last cycle."""

from __future__ import annotations

import click
from sqlalchemy import select

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table, short_time
from meta.model.errors import INVALID_SPEC
from meta.store.models import Job, Task, TaskReason


@click.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def explain(state: CliState, job: str, as_json: bool) -> None:
    """Explain why JOB's tasks wait: one typed reason each, and what would make them run."""
    service = state.service()
    status = service.status(job, principal=state.principal())
    with service.db.session() as session:
        rows = session.execute(
            select(Task.index, Task.name, Task.state, Task.reason, TaskReason)
            .outerjoin(TaskReason, TaskReason.task_id == Task.id)
            .where(Task.job_id == status.summary.id)
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
    if as_json:
        echo_json({"job": status.summary.short_id, "state": status.summary.state, "tasks": items})
        return
    click.echo(f"job {status.summary.short_id}: {status.summary.state}")
    echo_table(
        ["TASK", "STATE", "REASON", "WHY", "WHAT WOULD HELP", "SINCE"],
        [
            [i["task"], i["state"], i["code"] or "-", i["message"], i["remedy"] or "-", short_time(i["at"])]
            for i in items
        ],
    )


def _item(
    index: int, name: str, task_state: str, task_reason: str | None, reason: TaskReason | None, blocking: dict
) -> dict:
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

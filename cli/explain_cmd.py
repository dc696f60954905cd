"""``metasched explain JOB``: why each of a job's tasks waits, from the last cycle."""

from __future__ import annotations

import click
from sqlalchemy import select

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table, short_time
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
            select(Task.index, Task.name, Task.state, TaskReason)
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
    items = [
        {
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
        for index, name, task_state, reason in rows
    ]
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


def _no_reason(task_state: str) -> str:
    if task_state == "pending":
        return "no scheduling cycle has considered it yet (is `metasched serve` running?)"
    return f"not waiting ({task_state})"

"""Job commands: submit, status, list, cancel, retry."""

from __future__ import annotations

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table, short_time
from meta.model.spec import load_spec_file
from meta.model.states import JobState
from meta.service.views import JobStatus, JobSummary


def _tasks_text(summary: JobSummary) -> str:
    return ", ".join(f"{count} {state}" for state, count in sorted(summary.tasks.items()))


@click.command()
@click.option("-f", "--file", "path", required=True, type=click.Path(dir_okay=False), help="Job file (YAML or JSON).")
@click.option("--key", default=None, help="Idempotency key: resubmitting with the same key returns the same job.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_state
@handle_errors
def submit(state: CliState, path: str, key: str | None, as_json: bool) -> None:
    """Submit a job file; prints the job id."""
    spec = load_spec_file(path)
    result = state.service().submit(spec, idempotency_key=key, principal=state.principal())
    if as_json:
        echo_json({**result.job.to_dict(), "created": result.created})
        return
    click.echo(result.job.short_id)


@click.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True, help="Print the full status as JSON.")
@pass_state
@handle_errors
def status(state: CliState, job: str, as_json: bool) -> None:
    """Show a job: spec summary, tasks, attempts (Slurm id, nodes, exit code) and latest reasons."""
    result = state.service().status(job, principal=state.principal())
    if as_json:
        echo_json(result.to_dict())
        return
    _print_status(result)


def _print_status(result: JobStatus) -> None:
    s = result.summary
    click.echo(f"job {s.short_id} ({s.id})")
    click.echo(f"  name {s.name}  kind {s.kind}  tenant {s.tenant}  queue {s.queue}  class {s.priority_class}")
    click.echo(f"  state {s.state}  tasks: {_tasks_text(s)}  submitted {short_time(s.submitted_at)}")
    rows = []
    for task in result.tasks:
        last = task.attempts[-1] if task.attempts else None
        rows.append(
            [
                task.index,
                task.name,
                task.state,
                len(task.attempts),
                last.state if last else "-",
                last.fencing_token if last else "-",
                (last.slurm_job_id or "-") if last else "-",
                ",".join(last.nodes) if last and last.nodes else "-",
                last.exit_code if last and last.exit_code is not None else "-",
                task.reason,
            ]
        )
    click.echo("")
    echo_table(["TASK", "NAME", "STATE", "ATTEMPTS", "LAST", "TOKEN", "SLURM", "NODES", "EXIT", "REASON"], rows)
    if result.recent:
        click.echo("\nrecent transitions:")
        for t in result.recent[:8]:
            why = f" ({t.reason})" if t.reason else ""
            click.echo(f"  {short_time(t.at)}  {t.entity} {t.entity_id[:8]}  {t.from_state} -> {t.to_state}{why}")


@click.command(name="list")
@click.option("--tenant", "tenant_filter", default=None, help="Only this tenant's jobs.")
@click.option("--state", "state_filter", type=click.Choice([s.value for s in JobState]), default=None)
@click.option("--limit", default=200, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_state
@handle_errors
def list_jobs(
    state: CliState, tenant_filter: str | None, state_filter: str | None, limit: int, as_json: bool
) -> None:
    """List jobs, newest first."""
    jobs = state.service().list_jobs(
        principal=state.principal(),
        tenant=tenant_filter,
        state=JobState(state_filter) if state_filter else None,
        limit=limit,
    )
    if as_json:
        echo_json([job.to_dict() for job in jobs])
        return
    echo_table(
        ["JOB", "NAME", "TENANT", "KIND", "STATE", "TASKS", "SUBMITTED"],
        [[j.short_id, j.name, j.tenant, j.kind, j.state, _tasks_text(j), short_time(j.submitted_at)] for j in jobs],
    )


@click.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True, help="Print the resulting status as JSON.")
@pass_state
@handle_errors
def cancel(state: CliState, job: str, as_json: bool) -> None:
    """Cancel a job (idempotent): pending tasks end, running attempts are stopped in Slurm."""
    result = state.service().cancel(job, principal=state.principal())
    if as_json:
        echo_json(result.to_dict())
        return
    click.echo(f"job {result.summary.short_id}: {result.summary.state}")


@click.command()
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="Print the retried tasks as JSON.")
@pass_state
@handle_errors
def retry(state: CliState, ref: str, as_json: bool) -> None:
    """Retry the failed or cancelled tasks of JOB (or one task, JOB/INDEX)."""
    tasks = state.service().retry(ref, principal=state.principal())
    if as_json:
        echo_json([{"id": t.id, "index": t.index, "name": t.name, "state": t.state} for t in tasks])
        return
    click.echo(f"retrying {len(tasks)} task(s): " + ", ".join(f"{t.index}:{t.name}" for t in tasks))

"""Job commands: submit, status, list, cancel, retry (rendered from the API's JSON)."""

from __future__ import annotations

import os
from typing import Any

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors, refuse_submission
from cli.log_paths import attempt_logs
from cli.output import echo_json, echo_table, short_time
from cli.sbatch.squeue_format import duration
from meta.model.api_operations import MAX_QUEUE_JOB_IDS
from meta.model.errors import InvalidRequest
from meta.model.states import LIVE_ATTEMPT_STATES, JobState

_LIVE_ATTEMPTS = {state.value for state in LIVE_ATTEMPT_STATES}


def tasks_text(counts: dict[str, int]) -> str:
    """tasks_text renders task counts per state (``2 pending, 1 running``)."""
    return ", ".join(f"{count} {state}" for state, count in sorted(counts.items()))


def read_job_file(path: str) -> str:
    """read_job_file reads a job file within the limits (≤ 1 MiB, strict UTF-8, no NUL)."""
    from meta.model.job_text import decode_job_text, read_job_bytes

    return decode_job_text(read_job_bytes(path), path)


def _cwd() -> str | None:
    """_cwd is the submission folder (None when it was removed under us)."""
    try:
        return os.getcwd()
    except OSError:
        return None


@click.command()
@click.option("-f", "--file", "paths", required=True, multiple=True, type=click.Path(dir_okay=False),
              help="Job file (YAML or JSON); several -f submit them together, all or none.")  # fmt: skip
@click.option("--key", default=None, help="Idempotency key: resubmitting with the same key returns the same job.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_state
@handle_errors
def submit(state: CliState, paths: tuple[str, ...], key: str | None, as_json: bool) -> None:
    """Submit job files; prints one job id per file."""
    texts = [(path, read_job_file(path)) for path in paths]
    try:
        if len(texts) == 1:
            source, text = texts[0]
            results = [state.backend().submit(spec_text=text, source=source, key=key, submit_dir=_cwd())]
        else:
            jobs = [{"spec_text": text, "source": source} for source, text in texts]
            results = state.backend().submit_batch(jobs=jobs, key=key, submit_dir=_cwd())["jobs"]
    except Exception as exc:
        refuse_submission(exc)
        raise
    if as_json:
        echo_json(results[0] if len(results) == 1 else results)
        return
    for result in results:
        click.echo(result["short_id"])


@click.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True, help="Print the full status as JSON.")
@pass_state
@handle_errors
def status(state: CliState, job: str, as_json: bool) -> None:
    """Show a job: spec summary, tasks, attempts (Slurm id, nodes, exit code) and latest reasons."""
    result = state.backend().status(job)
    if as_json:
        echo_json(result)
        return
    _print_status(result)


def _exit(attempt: dict[str, Any] | None) -> Any:
    """_exit is an ended attempt's exit code; ``-`` while it runs (a running job has none yet)."""
    if attempt is None or attempt["exit_code"] is None or attempt["state"] in _LIVE_ATTEMPTS:
        return "-"
    return attempt["exit_code"]


def _print_status(s: dict[str, Any]) -> None:
    click.echo(f"job {s['short_id']} ({s['id']})")
    click.echo(f"  name {s['name']}  kind {s['kind']}  tenant {s['tenant']}  queue {s['queue']}  class {s['priority_class']}")
    click.echo(f"  state {s['state']}  tasks: {tasks_text(s['tasks'])}  submitted {short_time(s['submitted_at'])}")
    if s.get("hold"):
        reason = "JobHeldAdmin" if s["hold"] == "admin" else "JobHeldUser"
        click.echo(f"  held ({reason}): `metasched release {s['short_id']}` lets it be scheduled")
    rows = []
    for task in s["task_list"]:
        last = task["attempts"][-1] if task["attempts"] else None
        rows.append(
            [
                task["index"],
                task["name"],
                task["state"],
                len(task["attempts"]),
                last["state"] if last else "-",
                last["fencing_token"] if last else "-",
                (last["slurm_job_id"] or "-") if last else "-",
                ",".join(last["nodes"]) if last and last["nodes"] else "-",
                _exit(last),
                task["reason"],
            ]
        )
    click.echo("")
    echo_table(["TASK", "NAME", "STATE", "ATTEMPTS", "LAST", "TOKEN", "SLURM", "NODES", "EXIT", "REASON"], rows)
    _print_logs(s)
    if s["recent_transitions"]:
        click.echo("\nrecent transitions:")
        for t in s["recent_transitions"][:8]:
            why = f" ({t['reason']})" if t["reason"] else ""
            click.echo(
                f"  {short_time(t['at'])}  {t['entity']} {t['entity_id'][:8]}  {t['from_state']} -> {t['to_state']}{why}"
            )


def _print_logs(s: dict[str, Any]) -> None:
    """_print_logs lists where each launched attempt wrote its stdout and stderr."""
    lines = []
    for task in s["task_list"]:
        for attempt in task["attempts"]:
            if attempt.get("slurm_job_id"):
                stdout, stderr = attempt_logs(s, attempt)
                err = "same file" if stderr == stdout else stderr
                lines.append(f"  task {task['index']} attempt {attempt['number']} (Slurm {attempt['slurm_job_id']}): "
                             f"stdout {stdout}  stderr {err}")  # fmt: skip
    if lines:
        click.echo("\nlogs:")
        for line in lines:
            click.echo(line)


@click.command(name="list")
@click.option("--tenant", "tenant_filter", default=None, help="Only this tenant's jobs.")
@click.option("--state", "state_filter", type=click.Choice([s.value for s in JobState]), default=None)
@click.option("--limit", default=200, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--after", default=None, metavar="JOB", help="Start after this job (the last one of the previous page).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_state
@handle_errors
def list_jobs(
    state: CliState, tenant_filter: str | None, state_filter: str | None, limit: int, after: str | None, as_json: bool
) -> None:
    """List jobs, newest first; --after JOB pages on from the last job of a page."""
    backend = state.backend()
    jobs = backend.list_jobs(tenant=tenant_filter, state=state_filter, limit=limit, after=after)
    queue = queue_fields(backend, [j["short_id"] for j in jobs])
    jobs = [{**j, **queue.get(j["short_id"], {})} for j in jobs]
    if as_json:
        echo_json(jobs)
        return
    echo_table(
        ["JOB", "NAME", "TENANT", "KIND", "STATE", "TASKS", "TIME_LIMIT", "NODES", "SLURM", "REASON", "SUBMITTED"],
        [[j["short_id"], j["name"], j["tenant"], j["kind"], j["state"], tasks_text(j["tasks"]),
          duration(j["time_limit_s"]) if j.get("time_limit_s") else "-", j.get("nodes", "-"),
          ",".join(j.get("slurm_job_ids") or []) or "-", j.get("reason") if j["state"] == "pending" else "-",
          short_time(j["submitted_at"])] for j in jobs],
    )  # fmt: skip


QUEUE_FIELDS = ("time_limit_s", "nodes", "nodelist", "slurm_job_ids", "reason", "run_time_s")


def queue_fields(backend: Any, short_ids: list[str]) -> dict[str, dict[str, Any]]:
    """queue_fields are msqueue's fields (time limit, nodes, Slurm ids, reason) of the listed jobs, a call per page of ids."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(short_ids), MAX_QUEUE_JOB_IDS):
        chunk = short_ids[start : start + MAX_QUEUE_JOB_IDS]
        for row in backend.queue(jobs=chunk, states=["all"], any_age=True, limit=len(chunk)):
            found[row["job_id"]] = {key: row[key] for key in QUEUE_FIELDS}
    return found


@click.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True, help="Print the resulting status as JSON.")
@pass_state
@handle_errors
def cancel(state: CliState, job: str, as_json: bool) -> None:
    """Cancel a job (idempotent): pending tasks end, running attempts are stopped in Slurm."""
    result = state.backend().cancel(job)
    if as_json:
        echo_json(result)
        return
    click.echo(f"job {result['short_id']}: {result['state']}")


@click.command()
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="Print the retried tasks as JSON.")
@pass_state
@handle_errors
def retry(state: CliState, ref: str, as_json: bool) -> None:
    """Retry the failed or cancelled tasks of JOB (or one task, JOB/INDEX)."""
    job, task = split_task_ref(ref)
    tasks = state.backend().retry(job, task)
    if as_json:
        echo_json(tasks)
        return
    click.echo(f"retrying {len(tasks)} task(s): " + ", ".join(f"{t['index']}:{t['name']}" for t in tasks))


def split_task_ref(ref: str) -> tuple[str, int | None]:
    """split_task_ref reads ``JOB`` or ``JOB/INDEX`` (a bad index is a usage error naming the form)."""
    job, slash, index = ref.strip().partition("/")
    if not slash:
        return job, None
    if not (index.isascii() and index.isdigit()) or len(index) > 9:
        raise InvalidRequest(f"task reference {ref!r}: use JOB/INDEX, e.g. {job}/0")
    return job, int(index)

"""The site's own history as a simulator trace: one row per task (its chain of attempts) of the jobs submitted in a window.

Rules (``metasched plan history`` prints the same ones):

* **Window.** Jobs *submitted* in [since, until); the store is read as it stood at the *cut*,
  ``min(until, now)``: attempts, run time and task states after the cut are not seen.
* **One row per task.** A task is a training gang, an inference partition, an evaluation or one
  array element; its attempts (retries, requeues after preemption) are one chain.
* **submit_time** = seconds from ``since`` to the moment the task became *eligible*:
  the latest of (1) the job's submit time, (2) its ``begin`` time, (3) the moment its dependency
  was satisfied, as the daemon's gates compute it (``meta.policy.dependencies.eligible_since`` over
  the named jobs as the store knows them now: the end of an ``afterok``/``afterany``/``afternotok``
  job, the start plus delay of an ``after`` job, per element for ``aftercorr``), and (4) the last
  ``metasched release`` of the job (the audit line ``job.release``) before the task's first
  attempt — the states have no "held" or "waiting on a dependency" state, so the transition log
  cannot say when a gate opened. The result is capped at the creation of the task's first attempt:
  nothing is placed before it is eligible (this also covers a pruned audit trail).
* **duration_s** = the sum over the task's attempts that started before the cut of
  (ended_at, or the cut if later or still running) − started_at; ``attempts`` counts those started
  attempts (an attempt evicted or refused before it ran did no work).
* **outcome** = the end of the last started attempt: succeeded, failed (failed or lost),
  cancelled, preempted, or running when it had not ended by the cut.
* **Censoring.** A task whose state at the cut (the transition log) is not terminal — running, or
  waiting for a retry — is kept with its run time up to the cut and ``censored = 1``: it may run
  longer than the row says. A task with no attempt started before the cut (still waiting, held,
  or cancelled while waiting) has no run time to replay: it is skipped and counted
  (``skipped_never_started``), as is a job whose stored spec today's rules refuse.
* **Shape.** What was *asked*: workers × GPUs per worker (``num_gpus`` is the product), cpus and
  memory over all workers, the GPU type, the time limit; ``queue_delay_s`` = first start − eligible.
* **Launch delay.** The export's ``launch_delay_s`` is the median of started_at − created_at (the
  daemon's decision → Slurm's RUNNING) over the window's attempts that started before the cut
  (``launch_attempts`` of them; 0 s when none did). A recorded queue delay ends at RUNNING, so it
  includes that launch; the replays (``meta.plan.calibrate``) simulate it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from statistics import median
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.cycle.snapshot.gates import job_gates, observe_elements, observe_jobs
from meta.model.dependency import Dependency
from meta.model.durations import utcnow
from meta.model.errors import JOB_FAULTS
from meta.model.resources import ResourceVector
from meta.model.spec import spec_from_json
from meta.model.states import AttemptState, TaskState
from meta.policy.dependencies import Gates, ObservedJob, eligible_since
from meta.store.chunks import chunked
from meta.store.models import Attempt, AuditEvent, Job, JobSpecRow, Task, Transition

JOBS_PER_READ = 500  # jobs whose tasks, attempts and transitions are read together
SPEC_CACHE = 4096  # spec texts kept with their reading (resubmitted specs are parsed once; memory stays bounded)
RELEASE = "job.release"  # the audit action of `metasched release` (meta/service/job_holds.py)
TERMINAL = frozenset({TaskState.SUCCEEDED.value, TaskState.FAILED.value, TaskState.CANCELLED.value})
_OUTCOME = {
    AttemptState.SUCCEEDED.value: "succeeded",
    AttemptState.FAILED.value: "failed",
    AttemptState.LOST.value: "failed",
    AttemptState.CANCELLED.value: "cancelled",
    AttemptState.PREEMPTED.value: "preempted",
}
RUNNING = "running"


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """HistoryRow is one task's chain of attempts as a trace row (times in seconds)."""

    job_id: str  # the job's short id; ``SHORT_ELEMENT`` for a job of several tasks
    submit_time: float  # eligible moment − since
    duration_s: float
    num_gpus: int
    gpu_type: str | None
    num_cpus: float
    memory_mib: int
    tenant: str
    job_kind: str
    workers: int
    gpus_per_worker: int
    attempts: int
    outcome: str
    censored: bool
    queue_delay_s: float
    time_limit_s: float
    user: str
    name: str


@dataclass
class HistoryExport:
    """HistoryExport is the rows of a window and what was left out of them."""

    since: datetime
    until: datetime
    cut: datetime  # the store as it stood then: min(until, now)
    rows: list[HistoryRow] = field(default_factory=list)
    jobs: int = 0  # jobs submitted in the window
    skipped_never_started: int = 0  # tasks without an attempt started before the cut
    skipped_bad_spec: int = 0  # tasks of jobs whose stored spec today's rules refuse
    # decision → Slurm's RUNNING: the median of started_at − created_at over the attempts that started (module docstring)
    launch_delay_s: float = 0.0
    launch_attempts: int = 0  # the attempts it was measured on (0: none started, no measure)

    @property
    def censored(self) -> int:
        """censored counts the rows whose task had not ended at the cut."""
        return sum(1 for row in self.rows if row.censored)


@dataclass(frozen=True, slots=True)
class _Run:
    """_Run is one attempt's times and state."""

    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    state: str


def history_rows(session: Session, since: datetime, until: datetime | None, now: datetime | None = None) -> HistoryExport:
    """history_rows exports the tasks of the jobs submitted in [since, until) by the module's rules."""
    now = now or utcnow()
    end = until or now
    export = HistoryExport(since, end, min(end, now))
    # plain columns: an ORM Job would also load its spec row (joined), which _asked reads and parses once
    jobs = session.execute(
        select(*_JOB_COLUMNS).where(Job.submitted_at >= since, Job.submitted_at < end).order_by(Job.submitted_at, Job.id)
    ).all()
    export.jobs = len(jobs)
    releases = _releases(session, since, export.cut)
    asked = _asked(session, [job.id for job in jobs])
    # the jobs every dependency names, observed once for the window (the same reads, in the same transaction,
    # as per chunk of jobs, where each chunk's look-up scanned the jobs and attempts tables again)
    observed = _observed(session, [a.gates.dependency for a in asked.values() if a.gates and a.gates.dependency])
    launches: list[float] = []
    for chunk in chunked(jobs, JOBS_PER_READ):
        _export_chunk(session, chunk, asked, observed, releases, export, launches)
    export.rows.sort(key=lambda row: (row.submit_time, row.job_id))
    export.launch_delay_s = median(launches) if launches else 0.0
    export.launch_attempts = len(launches)
    return export


_JOB_COLUMNS = (Job.id, Job.short_id, Job.submitted_at, Job.tenant, Job.kind, Job.name, Job.submitted_by, Job.owner_uid)


@dataclass(frozen=True, slots=True)
class _Asked:
    """_Asked is what a job's spec says of each of its tasks' rows, read once per job."""

    single: bool  # one task: its row is named by the job's short id
    array: bool  # an array's rows are named by element, other jobs' by task index
    workers: int
    per_worker: ResourceVector  # what one worker asks for
    time_limit_s: float
    gates: Gates | None  # begin and dependency (holds are read from their releases)
    per_element: bool  # aftercorr: the dependency is decided per array element


def _releases(session: Session, since: datetime, cut: datetime) -> dict[str, list[datetime]]:
    """_releases is each job's release times (by short id) in the window: no job of it was held earlier."""
    found: dict[str, list[datetime]] = defaultdict(list)
    rows = session.execute(
        select(AuditEvent.subject, AuditEvent.at)
        .where(AuditEvent.action == RELEASE, AuditEvent.at >= since, AuditEvent.at < cut)
    )
    for subject, at in rows:
        found[subject].append(at)
    return found


def _asked(session: Session, job_ids: Sequence[str]) -> dict[str, _Asked]:
    """_asked parses each job's stored spec into what its rows need; a spec today's rules refuse is left out."""
    found: dict[str, _Asked] = {}
    parsed: dict[str, _Asked | None] = {}  # spec text -> its reading: resubmitted specs are parsed once
    for chunk in chunked(job_ids):
        rows = session.execute(select(JobSpecRow.job_id, JobSpecRow.spec_json).where(JobSpecRow.job_id.in_(chunk)))
        for job_id, text in rows:
            asked = parsed[text] if text in parsed else _read_spec(text)
            if len(parsed) < SPEC_CACHE:
                parsed[text] = asked
            if asked is not None:
                found[job_id] = asked
    return found


def _read_spec(text: str) -> _Asked | None:
    """_read_spec is one stored spec's reading, or None when today's rules refuse it."""
    try:
        spec = spec_from_json(text)
    except JOB_FAULTS:  # SpecError is a ValueError: the job is counted, not exported
        return None
    gates = job_gates(spec, None)  # holds are read from their releases
    dependency = gates.dependency if gates is not None else None
    return _Asked(
        single=spec.task_count() == 1, array=bool(spec.array), workers=spec.workers_per_task(),
        per_worker=spec.worker_resources(), time_limit_s=spec.time_limit_s, gates=gates,
        per_element=bool(dependency and dependency.corresponding()),
    )


def _export_chunk(session: Session, jobs: Sequence[Any], asked: dict[str, _Asked], observed: dict[str, ObservedJob],
                  releases: dict[str, list[datetime]], export: HistoryExport, launches: list[float]) -> None:
    """_export_chunk adds the rows of a few hundred jobs, read with a few queries, and their attempts' launch delays."""
    ids = [job.id for job in jobs]
    tasks = session.execute(
        select(Task.id, Task.job_id, Task.index, Task.name).where(Task.job_id.in_(ids)).order_by(Task.job_id, Task.index)
    ).all()
    task_ids = [task.id for task in tasks]
    runs = _runs(session, task_ids, export.cut)
    states = _states_at(session, task_ids, export.cut)
    cut = export.cut
    launches.extend(max(0.0, (run.started_at - run.created_at).total_seconds())  # a clock step never goes below 0
                    for chain in runs.values() for run in chain if run.started_at is not None and run.started_at < cut)
    by_job: dict[str, list[Any]] = defaultdict(list)
    for task in tasks:
        by_job[task.job_id].append(task)
    cut_ts = export.cut.timestamp()
    for job in jobs:
        spec = asked.get(job.id)
        if spec is None:
            export.skipped_bad_spec += len(by_job[job.id])
            continue
        job_releases = releases.get(job.short_id, [])
        for task in by_job[job.id]:
            row = _row(job, spec, task, runs.get(task.id, []), states.get(task.id), observed, job_releases,
                       export, cut_ts)
            if row is None:
                export.skipped_never_started += 1
            else:
                export.rows.append(row)


def _runs(session: Session, task_ids: Sequence[str], cut: datetime) -> dict[str, list[_Run]]:
    """_runs is each task's attempts created before the cut, by number (by task id: attempts are indexed by task)."""
    found: dict[str, list[_Run]] = defaultdict(list)
    for chunk in chunked(task_ids):
        rows = session.execute(
            select(Attempt.task_id, Attempt.created_at, Attempt.started_at, Attempt.ended_at, Attempt.state)
            .where(Attempt.task_id.in_(chunk), Attempt.created_at < cut)
            .order_by(Attempt.task_id, Attempt.number)
        )
        for task_id, created, started, ended, state in rows:
            found[task_id].append(_Run(created, started, ended, state))
    return found


def _states_at(session: Session, task_ids: Sequence[str], cut: datetime) -> dict[str, str]:
    """_states_at is each task's state at the cut: the last transition of the log before it."""
    found: dict[str, str] = {}
    for chunk in chunked(task_ids):
        rows = session.execute(
            select(Transition.entity_id, Transition.to_state)
            .where(Transition.entity == "task", Transition.entity_id.in_(chunk), Transition.at < cut)
            .order_by(Transition.at, Transition.id)
        )
        found.update(dict(rows.all()))  # ordered by time: the last line of each task wins
    return found


def _observed(session: Session, dependencies: Iterable[Dependency]) -> dict[str, ObservedJob]:
    """_observed is how far the jobs the dependencies name have come, read as the daemon's gates read them."""
    dependencies = list(dependencies)
    refs = {ref for dep in dependencies for ref in dep.jobs()}
    if not refs:
        return {}
    observed = observe_jobs(session, refs)
    corr = {ref for dep in dependencies if dep.corresponding() for ref in dep.jobs()}
    observed.update(observe_elements(session, corr))
    return observed


def _eligible(job: Any, spec: _Asked, element: str | None, observed: dict[str, ObservedJob],
              releases: list[datetime], first_created: datetime, cut_ts: float) -> datetime:
    """_eligible is when the task became eligible, by the module's rule (capped at its first attempt)."""
    moment = job.submitted_at
    gates = spec.gates
    if gates is not None:
        since = eligible_since(gates, observed, cut_ts, element if spec.per_element else None)
        if since is not None:
            moment = max(moment, datetime.fromtimestamp(since, tz=UTC))
    released = [at for at in releases if at <= first_created]
    if released:
        moment = max(moment, max(released))
    return min(moment, first_created)


def _row(job: Any, spec: _Asked, task: Any, runs: list[_Run], state: str | None, observed: dict[str, ObservedJob],
         releases: list[datetime], export: HistoryExport, cut_ts: float) -> HistoryRow | None:
    """_row is one task's trace row, or None when no attempt of it started before the cut."""
    cut = export.cut
    started = [run for run in runs if run.started_at is not None and run.started_at < cut]
    if not started:
        return None
    ran = sum(max(0.0, (min(run.ended_at or cut, cut) - run.started_at).total_seconds())  # type: ignore[operator]
              for run in started)
    last = started[-1]
    outcome = RUNNING if last.ended_at is None or last.ended_at >= cut else _OUTCOME.get(last.state, "failed")
    eligible = _eligible(job, spec, task.name, observed, releases, runs[0].created_at, cut_ts)
    first_start = min(run.started_at for run in started)  # type: ignore[type-var]
    per_worker = spec.per_worker
    workers = spec.workers
    return HistoryRow(
        job_id=job.short_id if spec.single else f"{job.short_id}_{task.name if spec.array else task.index}",
        submit_time=(eligible - export.since).total_seconds(),
        duration_s=ran,
        num_gpus=workers * per_worker.gpus,
        gpu_type=per_worker.gpu_type,
        num_cpus=workers * per_worker.cpus,
        memory_mib=workers * per_worker.memory_mib,
        tenant=job.tenant,
        job_kind=job.kind,
        workers=workers,
        gpus_per_worker=per_worker.gpus,
        attempts=len(started),
        outcome=outcome,
        censored=state not in TERMINAL,
        queue_delay_s=max(0.0, (first_start - eligible).total_seconds()),
        time_limit_s=spec.time_limit_s,
        user=job.submitted_by or (f"uid{job.owner_uid}" if job.owner_uid is not None else ""),
        name=job.name,
    )

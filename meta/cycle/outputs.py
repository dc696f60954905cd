"""Cycle step 14, outputs: inference partitions committed on success, job manifests written.

Each job writes under its own ``<output>/<job id>/`` (``_attempts/<attempt>/`` staging and the
job's ``_manifest.json``), so two jobs with the same output folder never overwrite each other.

A partition's program may commit its own manifest (``metasched commit``); when it exits 0
without doing so, step 4 (reconcile) commits the attempt's staging directory on its behalf —
before the attempt leaves its live state, so the usual fence (current attempt, token, lease)
applies to both paths alike. Nothing a user made is read inside the period: the staging folder
is read, and the job manifest written, by ``OutputWorkers`` (a child process as the job's
owner, capped in files, bytes and seconds); the attempt stays live until its answer is in, and
a refusal (over a cap, a symlink) fails the partition with that reason.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from checkpoint.manifest import commit, commit_many, committed, job_manifest
from checkpoint.manifest_files import check_manifest
from checkpoint.owner_workers import OutputWorkers, Owner
from meta.cycle.snapshot.build import SpecCache
from meta.model.errors import JOB_FAULTS, MetaschedError
from meta.model.output_hold import OutputHold
from meta.model.spec import InferenceSpec
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, TaskState
from meta.store.chunks import among, chunked
from meta.store.models import Attempt, Job, PartitionCommit, Task

log = logging.getLogger("metasched.outputs")
_ADVICE = "commit large outputs from the job with `metasched commit`"


def owner_of(job: Job) -> Owner:
    """owner_of is whom the daemon acts as in the job's folders: its owner (None: the daemon itself)."""
    return Owner(uid=job.owner_uid, gid=job.owner_gid)


def commit_on_success(
    session: Session, attempt: Attempt, specs: SpecCache, workers: OutputWorkers
) -> OutputHold | None:
    """commit_on_success commits a succeeded inference attempt's staging dir unless it committed itself.

    None: nothing to commit, or committed now (the attempt may succeed). ``OutputHold()``: the
    folder is being read off the period (look again next period); with a reason: refused.
    """
    spec = specs.get(session, attempt.job_id)
    if not isinstance(spec, InferenceSpec) or _committed(session, attempt.task_id):
        return None
    job = session.get(Job, attempt.job_id)
    assert job is not None
    key = f"scan:{attempt.id}:{attempt.fencing_token}"
    answer = workers.result(key)
    if answer is None:
        request = {"action": "scan", "output": spec.output, "job": job.short_id, "attempt": attempt.id}
        workers.submit(key, request, owner_of(job))
        return OutputHold()
    if not answer.ok:
        return OutputHold(f"output not committed: {answer.reason}; {_ADVICE}")
    try:
        manifest = check_manifest(answer.data)
        batch = session.info.get(_BATCH)
        if batch is not None:  # a group of ended partitions: committed together by commit_expected
            batch.append((attempt, manifest))
            return None
        commit(session, attempt.id, attempt.fencing_token, manifest)
    except MetaschedError as exc:
        log.warning("could not commit output of attempt %s: %s", attempt.id, exc)
    return None


# session.info keys while a group of succeeding attempts is settled (expect_commits .. commit_expected)
_KNOWN = "metasched.outputs.uncommitted"  # tasks read as not committed
_BATCH = "metasched.outputs.batch"  # (attempt, manifest) to commit together


def expect_commits(session: Session, task_ids: Collection[str]) -> list[object]:
    """expect_commits opens a group of succeeding attempts: which partitions are committed, and their tasks, read at once.

    Without it each attempt's check was a query of its own (``session.get`` cannot remember that
    a row is absent), and its commit's audit line another for the task; each commit then read its
    task's live attempt and inserted its row in a savepoint of its own: ~6 ms per ended partition
    (issue 24). Until ``commit_expected`` (or ``forget_expected``) the hook only collects the
    commits. The rows returned keep the session's weak identity map holding them.
    """
    ids = sorted(set(task_ids))
    rows: list[object] = []
    done: set[str] = set()
    for chunk in chunked(ids):
        commits = list(session.scalars(select(PartitionCommit).where(among(session, PartitionCommit.task_id, chunk))))
        done.update(c.task_id for c in commits)
        rows.extend(commits)
        rows.extend(session.scalars(select(Task).where(among(session, Task.id, chunk))))
    session.info[_KNOWN] = set(ids) - done
    session.info[_BATCH] = []
    return rows


def commit_expected(session: Session) -> None:
    """commit_expected commits what the group's hooks collected, in a few statements, and closes the group."""
    batch = session.info.get(_BATCH) or []
    forget_expected(session)
    for attempt_id, outcome in commit_many(session, batch).items():
        if isinstance(outcome, MetaschedError):
            log.warning("could not commit output of attempt %s: %s", attempt_id, outcome)


def forget_expected(session: Session) -> None:
    """forget_expected closes the group without committing (its savepoint is being rolled back)."""
    session.info.pop(_KNOWN, None)
    session.info.pop(_BATCH, None)


def _committed(session: Session, task_id: str) -> bool:
    """_committed: the partition's output is committed (known from expect_commits, or read)."""
    known = session.info.get(_KNOWN)
    if known is not None and task_id in known:
        return False
    return session.get(PartitionCommit, task_id) is not None


@dataclass
class Finalizing:
    """Finalizing is the leader's memory for step 14: jobs whose manifest is written, and those with the workers."""

    done: set[str] = field(default_factory=set)
    handed: set[str] = field(default_factory=set)


def finalize_jobs(
    session: Session,
    specs: SpecCache,
    state: Finalizing,
    workers: OutputWorkers,
    since: datetime | None = None,
) -> list[str]:
    """finalize_jobs hands succeeded inference jobs' manifests to the workers and returns those written since.

    With ``since``, only jobs with an attempt that succeeded since then are looked at (a job
    finishes with its last task's success), plus those still with the workers: the leader passes
    when it last looked, so a period does not scan every task of every inference job.
    """
    finished = []
    wanted = sorted(set(_succeeded(session, state.done, since)) | state.handed)
    for chunk in chunked(wanted):
        for job in session.scalars(select(Job).where(among(session, Job.id, chunk))):
            answer = workers.result(f"finalize:{job.id}")
            if answer is not None:
                state.handed.discard(job.id)
                state.done.add(job.id)
                if answer.ok:
                    finished.append(job.id)
                else:  # the output dir may live where this host cannot write, or be refused
                    log.warning("cannot finalize outputs of job %s: %s", job.short_id, answer.reason)
            elif job.id not in state.handed:
                _hand_over(session, specs, state, workers, job)
    return finished


def _succeeded(session: Session, done: set[str], since: datetime | None) -> list[str]:
    """_succeeded are the inference jobs not in ``done`` whose every task succeeded (with ``since``: among those with a success since).

    The jobs with a recent success are read first, and only their tasks are grouped: as one
    statement (jobs ``IN`` a grouped subquery over every inference task) the planner sometimes
    grouped all 110,000 tasks first, 0.9 s of a rested period at 100,000 waiting (issue 24).
    """
    unfinished = func.sum(case((Task.state == TaskState.SUCCEEDED.value, 0), else_=1))
    grouped = (
        select(Task.job_id).join(Job, Job.id == Task.job_id).where(Job.kind == "inference")
        .group_by(Task.job_id).having(unfinished == 0)
    )  # fmt: skip
    if since is None:
        return [job_id for job_id in session.scalars(grouped) if job_id not in done]
    recent = session.scalars(
        select(Attempt.job_id).where(Attempt.state == AttemptState.SUCCEEDED.value, Attempt.ended_at >= since)
        .distinct()
    )  # fmt: skip
    candidates = sorted(set(recent) - done)
    return [job_id for chunk in chunked(candidates) for job_id in session.scalars(grouped.where(among(session, Task.job_id, chunk)))]


def _hand_over(
    session: Session, specs: SpecCache, state: Finalizing, workers: OutputWorkers, job: Job
) -> None:
    """_hand_over gives the workers one job's manifest and the staging folders it no longer needs."""
    try:
        spec = specs.get(session, job.id)
    except JOB_FAULTS as exc:  # stored under older rules and refused now: nothing to write it by
        log.warning("cannot finalize outputs of job %s: its spec is refused: %s", job.short_id, exc)
        state.done.add(job.id)
        return
    assert isinstance(spec, InferenceSpec)
    keep = {c.attempt_id for c in committed(session, job.id)}
    live = [s.value for s in LIVE_ATTEMPT_STATES]
    ended = session.scalars(select(Attempt.id).where(Attempt.job_id == job.id, Attempt.state.not_in(live)))
    request = {"action": "finalize", "output": spec.output, "job": job.short_id,
               "manifest": job_manifest(session, job.id), "remove": sorted(set(ended) - keep)}  # fmt: skip
    workers.submit(f"finalize:{job.id}", request, owner_of(job))
    state.handed.add(job.id)

"""Cycle step 14, outputs: inference partitions committed on success, job manifests written.

Each job writes under its own ``<output>/<job id>/`` (``_attempts/<attempt>/`` staging and the
job's ``_manifest.json``), so two jobs with the same output folder never overwrite each other.

A partition's program may commit its own manifest (``metasched commit``); when it exits 0
without doing so, step 4 (reconcile) commits the attempt's staging directory on its behalf —
before the attempt leaves its live state, so the usual fence (current attempt, token, lease)
applies to both paths alike.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from checkpoint.manifest import (
    JOB_MANIFEST,
    build_manifest,
    commit,
    gc_staging,
    job_manifest,
    write_atomically,
)
from meta.cycle.actuate.launch_plan import job_output_dir, staging_dir
from meta.cycle.snapshot.build import SpecCache
from meta.model.errors import JOB_FAULTS, MetaschedError
from meta.model.spec import InferenceSpec
from meta.model.states import AttemptState, TaskState
from meta.store.models import Attempt, Job, PartitionCommit, Task

log = logging.getLogger("metasched.outputs")


def commit_on_success(session: Session, attempt: Attempt, specs: SpecCache) -> None:
    """commit_on_success commits a succeeded inference attempt's staging dir unless it committed itself."""
    spec = specs.get(session, attempt.job_id)
    if not isinstance(spec, InferenceSpec) or session.get(PartitionCommit, attempt.task_id) is not None:
        return
    job = session.get(Job, attempt.job_id)
    assert job is not None
    staging = Path(staging_dir(spec, job.short_id, attempt.id))
    legacy = Path(spec.output) / "_attempts" / attempt.id  # launched before per-job folders: staged there
    if not staging.is_dir() and legacy.is_dir():
        staging = legacy
    try:
        manifest = build_manifest(staging) if staging.is_dir() else {"root": str(staging), "files": [], "bytes": 0}
        commit(session, attempt.id, attempt.fencing_token, manifest)
    except MetaschedError as exc:
        log.warning("could not commit output of attempt %s: %s", attempt.id, exc)


def finalize_jobs(session: Session, specs: SpecCache, done: set[str], since: datetime | None = None) -> list[str]:
    """finalize_jobs writes the job manifest of succeeded inference jobs and removes stale staging.

    With ``since``, only jobs with an attempt that succeeded since then are looked at (a job
    finishes with its last task's success): the leader passes when it last looked, so a period
    does not scan every task of every inference job.
    """
    finished = []
    # the inference jobs whose every task succeeded, in one grouped query (not one query per job,
    # each reading all of its tasks, every period)
    unfinished = func.sum(case((Task.state == TaskState.SUCCEEDED.value, 0), else_=1))
    succeeded = (
        select(Task.job_id)
        .join(Job, Job.id == Task.job_id)
        .where(Job.kind == "inference", Job.id.not_in(done) if done else True)
        .where(
            Job.id.in_(
                select(Attempt.job_id).where(
                    Attempt.state == AttemptState.SUCCEEDED.value, Attempt.ended_at >= since
                )
            )
            if since is not None
            else True
        )
        .group_by(Task.job_id)
        .having(unfinished == 0)
    )
    for job in session.scalars(select(Job).where(Job.id.in_(succeeded))):
        try:
            spec = specs.get(session, job.id)
        except JOB_FAULTS as exc:  # stored under older rules and refused now: nothing to write it by
            log.warning("cannot finalize outputs of job %s: its spec is refused: %s", job.short_id, exc)
            done.add(job.id)
            continue
        assert isinstance(spec, InferenceSpec)
        manifest = job_manifest(session, job.id)
        folder = Path(job_output_dir(spec, job.short_id))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write_atomically(folder / JOB_MANIFEST, manifest)
            gc_staging(session, job.id, folder)
        except OSError as exc:  # the output dir may live where this host cannot write
            log.warning("cannot finalize outputs of job %s in %s: %s", job.short_id, folder, exc)
            continue
        done.add(job.id)
        finished.append(job.id)
    return finished

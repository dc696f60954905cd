"""A finished inference partition for the output tests: its staging folder, a reconciler with OutputWorkers."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import select

from checkpoint.owner_workers import OutputCaps, OutputWorkers
from meta.cycle.outputs import Finalizing, commit_on_success, finalize_jobs
from meta.cycle.reconcile import Reconciler, observe
from meta.cycle.snapshot.build import SpecCache
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store.models import Attempt, Job, Transition
from slurm_bridge.fake import FakeSlurm
from tests.runtime.support import attempt, inference, lead, place, share, submit

GIB = 1 << 30


class Partition:
    """Partition is one finished inference partition whose staging folder a test fills."""

    def __init__(
        self,
        service: Service,
        out: Path,
        caps: OutputCaps | None = None,
        owner: int | None = None,
        partitions: int = 2,
    ):
        self.service, self.fake = service, FakeSlurm()
        self.workers = OutputWorkers(caps)
        specs = SpecCache()
        self.reconciler = Reconciler(
            service.db,
            self.fake,
            on_success=lambda session, a: commit_on_success(session, a, specs, self.workers),
        )
        self.job, (task, *_) = submit(service, inference(str(out), partitions=partitions))
        if owner is not None:  # the job's owner: the workers read its folder as this uid
            with service.db.session() as session:
                job = session.get(Job, self.job)
                job.owner_uid = job.owner_gid = owner
        self.attempt = place(service.db, task, [share("node1", gpus=1)], AttemptState.RUNNING)
        slurm = self.fake.add_job(f"ms-{self.attempt}", f"metasched:attempt={self.attempt}:token=1")
        with service.db.session() as session:
            session.get(Attempt, self.attempt).slurm_job_id = str(slurm.job_id)
            self.folder = out / session.get(Job, self.job).short_id
        self.staging = self.folder / "_attempts" / self.attempt
        self.slurm_id = slurm.job_id
        self.leadership = lead(service.db)

    def reconcile(self) -> float:
        """reconcile runs one reconcile pass and returns how long it took."""
        started = time.monotonic()
        self.reconciler.apply(observe(self.fake, self.reconciler.since(), site=self.reconciler.site), self.leadership)
        return time.monotonic() - started

    def state(self) -> str:
        return attempt(self.service.db, self.attempt).state

    def failure(self) -> tuple[str, str]:
        """failure is the attempt's end: its failure category and the reason its move to failed gave."""
        with self.service.db.session() as session:
            reason = session.scalar(
                select(Transition.reason).where(
                    Transition.entity_id == self.attempt, Transition.to_state == "failed"
                )
            )
        return attempt(self.service.db, self.attempt).failure_category or "", reason or ""


def finalize(service: Service, state: Finalizing) -> list[str]:
    """finalize runs step 14 (hands finished jobs' manifests to the workers), waits for them, and runs it again to collect what they wrote."""
    workers = OutputWorkers()
    with service.db.session() as session:
        finalize_jobs(session, SpecCache(), state, workers)
    assert workers.wait_idle(30)
    with service.db.session() as session:
        return finalize_jobs(session, SpecCache(), state, workers)

"""For step 4 (reconcile), cancel attribution: a Slurm cancel metasched did not ask for, and who made it.

A job cancelled in Slurm that metasched did not ask to stop is a user's cancel when accounting
names someone allowed to cancel it (``CANCELLED by <uid>``: its owner, a coordinator of its
tenant, an admin): the metasched job is cancelled in that user's name and audited. A cancel
nobody can be named for (slurmctld's own, an unknown uid, no accounting record after
``cancel_attribution_s``) leaves the attempt ``lost``, retried under its policy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.orm import Session

from meta.cycle.reconcile.cancellers import Canceller
from meta.cycle.reconcile.observe import Observation, Sighting
from meta.model.errors import JOB_FAULTS
from meta.store import audit
from meta.store.lifecycle import job_spec
from meta.store.models import Attempt, Job, Task
from slurm_bridge.states import Outcome

log = logging.getLogger("metasched.reconciler")
WAIT = object()  # a cancel whose canceller accounting may still name: decide next period


class CancelAttribution:
    """CancelAttribution names who cancelled an attempt's job in Slurm, waiting a while for accounting."""

    def __init__(self, cancellers: Callable[[int], Canceller | None] | None, attribution_s: float) -> None:
        # who a ``CANCELLED by <uid>`` was (None: no cancel is attributed, every one is lost)
        self.cancellers = cancellers
        self.attribution_s = attribution_s
        # when an unrequested cancel was first seen without its canceller (waiting for slurmdbd);
        # only a wait: a restart waits again
        self.unattributed: dict[str, datetime] = {}

    def canceller(
        self, session: Session, attempt: Attempt, sighting: Sighting, observation: Observation
    ) -> Canceller | object | None:
        """canceller is who cancelled the attempt's job in Slurm, if allowed to; WAIT while sacct may still say."""
        if self.cancellers is None:
            return None
        record = sighting if sighting.source == "sacct" else observation.accounted(attempt.id, sighting.slurm_job_id)
        if record is None or (record.cancelled_by is None and record.observed.outcome != Outcome.CANCELLED):
            first = self.unattributed.setdefault(attempt.id, observation.at)
            if (observation.at - first).total_seconds() < self.attribution_s:
                return WAIT  # slurmdbd has not recorded the cancel yet
            return None
        self.unattributed.pop(attempt.id, None)
        if record.cancelled_by is None:
            return None
        who = self.cancellers(record.cancelled_by)
        job = session.get(Job, attempt.job_id)
        if who is None or job is None or not who.may_cancel(job.tenant, job.owner_uid):
            log.warning("Slurm job %s was cancelled by uid %s, who may not cancel it: lost",
                        sighting.slurm_job_id, record.cancelled_by)  # fmt: skip
            return None
        return who


def user_cancel(session: Session, attempt: Attempt, who: Canceller, slurm_job_id: str) -> None:
    """user_cancel marks the job cancelled by ``who`` and audits it, as ``metasched cancel`` would.

    An array element is its own Slurm job: scancel of it cancels that element only, as in Slurm.
    """
    job = session.get(Job, attempt.job_id)
    assert job is not None
    if is_array(session, job.id):
        task = session.get(Task, attempt.task_id)
        audit.record(session, who.name, "job.cancel", job.short_id, tenant=job.tenant, via="scancel",
                     slurm_job_id=slurm_job_id, uid=who.uid, elements=[task.name if task else None])  # fmt: skip
        return
    if not job.cancel_requested:
        audit.record(session, who.name, "job.cancel", job.short_id, tenant=job.tenant,
                     via="scancel", slurm_job_id=slurm_job_id, uid=who.uid)  # fmt: skip
        job.cancel_requested = True
        job.version += 1


def is_array(session: Session, job_id: str) -> bool:
    """is_array tells whether a job is an array (a spec the current rules refuse counts as none)."""
    try:
        return job_spec(session, job_id).array is not None
    except JOB_FAULTS:
        return False

"""For step 4 (reconcile), orphans: active metasched-tagged jobs whose attempt is not live are cancelled (I2)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from meta.cycle.reconcile.observe import Observation
from meta.cycle.reconcile.settings import ReconcileResult
from slurm_bridge.client import SlurmClient
from slurm_bridge.errors import SlurmError

log = logging.getLogger("metasched.reconciler")


def cancel_orphans(
    observation: Observation,
    live_ids: Collection[str],
    still_live: Collection[str],
    result: ReconcileResult,
    scancel: Callable[[str], None],
) -> None:
    """cancel_orphans cancels the active jobs squeue shows for attempts live neither before nor after the pass."""
    for attempt_id, sightings in observation.squeue.items():
        if attempt_id in live_ids or attempt_id in still_live:
            continue
        for sighting in sightings:
            if not sighting.observed.terminal:
                log.warning("orphan Slurm job %s (attempt %s): cancelling", sighting.slurm_job_id, attempt_id)
                scancel(sighting.slurm_job_id)
                result.orphans_cancelled.append(sighting.slurm_job_id)


def scancel(client: SlurmClient, slurm_job_id: str) -> None:
    """scancel cancels one Slurm job; a failure is logged and tried again by a later period."""
    try:
        client.cancel([slurm_job_id])
    except SlurmError as exc:
        log.warning("scancel %s failed: %s", slurm_job_id, exc)

"""For step 4 (reconcile), orphans: active jobs tagged by this site whose attempt is not live are cancelled (I2).

Only what the observation kept is looked at: another site's jobs were dropped as Slurm was read,
jobs with a tag older than sites count only when their attempt is in this store, and another
user's job with a tag was set aside as spoofed. An attempt this store never had is ours only as
a job of the daemon's own user (``ownership.Claims.of``).
"""

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
    still_live: Callable[[], Collection[str]],
    result: ReconcileResult,
    scancel: Callable[[str], None],
) -> None:
    """cancel_orphans cancels the active jobs squeue shows for attempts live neither before nor after the pass.

    ``still_live`` reads the live attempts again (one launched meanwhile is no orphan); it is
    called only when some active job's attempt was not live before. squeue lists ended jobs for
    MinJobAge, so most of its rows are ended jobs of ended attempts, never orphans: reading the
    10,000 live ids again every period for them cost ~30 ms (issue 24).
    """
    suspects = {
        attempt_id: active
        for attempt_id, sightings in observation.squeue.items()
        if attempt_id not in live_ids and (active := [s for s in sightings if not s.observed.terminal])
    }
    if not suspects:
        return
    now_live = still_live()
    for attempt_id, active in suspects.items():
        if attempt_id in now_live:
            continue
        for sighting in active:
            log.warning("orphan Slurm job %s (attempt %s): cancelling", sighting.slurm_job_id, attempt_id)
            scancel(sighting.slurm_job_id)
            result.orphans_cancelled.append(sighting.slurm_job_id)


def scancel(client: SlurmClient, slurm_job_id: str) -> None:
    """scancel cancels one Slurm job; a failure is logged and tried again by a later period."""
    try:
        client.cancel([slurm_job_id])
    except SlurmError as exc:
        log.warning("scancel %s failed: %s", slurm_job_id, exc)

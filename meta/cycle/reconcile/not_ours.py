"""For step 4 (reconcile), not ours: tagged jobs this site leaves alone are logged once, never acted on.

Two kinds, both neither followed, counted, cancelled nor audited as spoofed:
- jobs whose tag names another metasched site (another instance sharing the cluster): each such
  site is logged once per leader, at INFO — it is expected, not a fault;
- jobs whose tag is older than sites (``metasched:attempt=<id>``) and names an attempt this store
  does not have: launched by another instance before it was upgraded, or copied by hand. Each is
  logged once while it is seen, as a warning: after an upgrade an operator may want to look.
"""

from __future__ import annotations

import logging

from meta.cycle.reconcile.observe import Observation

log = logging.getLogger("metasched.reconciler")
# other sites remembered for "logged once": bounded, since a user may invent site names in comments
_MAX_SITES = 1024


class NotOurs:
    """NotOurs remembers which other sites and unclaimed legacy-tagged jobs were logged, so each is logged once."""

    def __init__(self) -> None:
        self.sites: set[str] = set()
        self.legacy: set[tuple[str, str]] = set()

    def report(self, observation: Observation) -> list[str]:
        """report logs what is new among the jobs left alone; returns the Slurm ids of new unclaimed legacy jobs."""
        for site in sorted(observation.foreign_sites - self.sites):
            if len(self.sites) >= _MAX_SITES:
                break
            self.sites.add(site)
            log.info("Slurm jobs tagged by metasched site %r share this cluster: left alone", site[:32])
        new = sorted(key for key in observation.unclaimed if key not in self.legacy)
        for attempt_id, slurm_job_id in new:
            log.warning(
                "Slurm job %s has a tag without a site for attempt %s, which this store does not have: "
                "left alone (not cancelled)", slurm_job_id, attempt_id[:128],
            )  # fmt: skip
        # only what is still seen is remembered; a period that skipped accounting forgets nothing
        seen = set(observation.unclaimed)
        self.legacy = seen if observation.accounting_read else self.legacy | seen
        return [slurm_job_id for _, slurm_job_id in new]

"""Cycle step 4, reconcile: move attempts by what Slurm reports, never by guesses.

Each period reads Slurm in a fixed number of batched calls — one ``squeue`` and, only
when some live attempt is missing from it, one ``sacct -P`` (sinfo is read by the daemon for the
inventory) — however many jobs there are. squeue lists ended jobs too for ``MinJobAge``, so in
a steady period accounting (slurmdbd, the slowest read) has nothing to add and is skipped.
Jobs are matched to attempts by their tag (the comment; ``ms-<attempt>`` names of older jobs),
never by Slurm job id alone. If a read fails, nothing is concluded: errors are unknowns, not job failures.
The tag names the site (the store's id): jobs of another metasched site sharing the cluster are
dropped as Slurm is read, and a tag older than sites is ours only when its attempt is stored
here (``not_ours.py`` logs the others once).

Per live attempt:
- seen (squeue, else sacct): record the Slurm id, renew the lease, follow the state;
- not seen, launch outcome unknown (``launch_unknown``, or ``launching`` without a Slurm id):
  after ``unknown_window_s`` with no trace in squeue *and* sacct the launch is confirmed absent
  and the *same* attempt is submitted again (same tag: idempotent by tag);
- not seen but launched before: ``lost`` after ``lost_grace_s`` without a sighting;
- not seen while this replica's launch pool still has it queued or in flight (``in_flight``):
  nothing is concluded — its sbatch may not have run yet — until the pool recorded the outcome.
Jobs tagged by this site with no live attempt are orphans and are cancelled (I2).
A job cancelled in Slurm that metasched did not ask to stop is a user's cancel when accounting
names someone allowed to cancel it (``CANCELLED by <uid>``: its owner, a coordinator of its
tenant, an admin): the metasched job is cancelled in that user's name and audited. A cancel
nobody can be named for (slurmctld's own, an unknown uid, no accounting record after
``cancel_attribution_s``) makes the attempt ``lost``, retried under its policy.

The seams, a module each: ``observe.py`` (the batched read), ``steady.py`` (the bulk path),
``sightings.py`` and ``seen.py`` (an attempt Slurm shows), ``unseen.py`` (one it does not:
relaunch or lost), ``orphans.py``, ``ownership.py`` with ``spoofed.py`` (another user's job
with a tag), ``not_ours.py`` (jobs left alone: other sites', unknown legacy tags),
``attribution.py`` with ``cancellers.py`` (who cancelled), ``signal_kills.py`` and ``target.py``
(the state a report implies); ``reconciler.py`` is the facade the daemon calls, ``Reconciler.run``.
"""

from meta.cycle.reconcile.observe import Observation, Sighting, observe
from meta.cycle.reconcile.reconciler import Reconciler
from meta.cycle.reconcile.settings import ReconcileResult, ReconcileSettings
from meta.cycle.reconcile.signal_kills import SIGNAL_KILL_REASON

__all__ = [
    "SIGNAL_KILL_REASON",
    "Observation",
    "ReconcileResult",
    "ReconcileSettings",
    "Reconciler",
    "Sighting",
    "observe",
]

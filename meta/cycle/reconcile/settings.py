"""For step 4 (reconcile): how long the reconciler waits before concluding from silence, and what a pass did."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from meta.model.output_hold import OutputHold
from meta.model.states import LIVE_ATTEMPT_STATES
from meta.store.models import Attempt

# called inside the transaction before an attempt moves to succeeded; None lets it succeed
SuccessHook = Callable[[Session, Attempt], "OutputHold | None"]
LIVE = [state.value for state in LIVE_ATTEMPT_STATES]  # the states whose Slurm job is followed


@dataclass(frozen=True)
class ReconcileSettings:
    """ReconcileSettings bound how long metasched waits before concluding from silence."""

    unknown_window_s: float = 15.0  # sacct is asynchronous: give a just-submitted job time to show
    lost_grace_s: float = 120.0
    lease_s: float = 300.0
    # a steady attempt's sighting and lease are written at most this often (not every period:
    # at 10,000 running jobs that UPDATE was a large part of a period); the reconciler remembers
    # the sightings in between, so "lost" still counts from the last one
    renew_every_s: float = 30.0
    sacct_lookback_s: float = 6 * 3600.0
    # slurmdbd is asynchronous: how long a cancel seen in squeue waits for sacct to say who
    cancel_attribution_s: float = 30.0
    # the uid jobs without an owner run as (sbatch's own user): their tagged jobs are the daemon's
    daemon_uid: int = field(default_factory=os.geteuid)
    # an inference partition on a cluster dark this long is replayed elsewhere (None: never; its
    # output commit is fenced, so the copy that may run on there never commits)
    dark_grace_s: float | None = 600.0


@dataclass
class ReconcileResult:
    """ReconcileResult counts what one reconcile pass did."""

    transitions: int = 0
    slurm_reads: int = 0  # squeue, and sacct when it was needed
    relaunch: list[str] = field(default_factory=list)  # attempts confirmed absent: submit again
    orphans_cancelled: list[str] = field(default_factory=list)
    duplicates_cancelled: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    spoofed: list[str] = field(default_factory=list)  # other users' jobs with an attempt's tag, first seen
    # jobs with a tag older than sites naming no attempt of this store, first seen: left alone
    legacy_ignored: list[str] = field(default_factory=list)
    foreign: int = 0  # squeue rows and sacct records tagged by another metasched site: left alone

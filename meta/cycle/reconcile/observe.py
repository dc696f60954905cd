"""For step 4 (reconcile), observe: one period's batched read of Slurm, indexed by attempt tag.

One ``squeue`` and, only when some live attempt is missing from it (or shows a cancel, whose
canceller only accounting names), one ``sacct -P``; an attempt on a dark cluster (several
clusters) is missing from squeue but needs no sacct: it is not judged until its cluster answers. Jobs are matched to attempts by their tag
(the comment; ``ms-<attempt>`` names of older jobs), never by Slurm job id alone.

Only this site's jobs are indexed: a tag naming another metasched site (another instance sharing
the cluster) is dropped while the output is read, so such a job is never followed, counted,
cancelled or reported — it is only counted in ``foreign``. A tag older than sites names none
(``Sighting.legacy``): it is kept for now, and ``Observation.screen`` sets it aside unless its
attempt is in this store. A tag is not enough either: ``screen`` keeps a tagged job for an
attempt only when it is the recorded job or runs as the attempt's user (``ownership.py``); the
others are set aside as spoofed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from meta.cycle.reconcile.listed import ListedRows, Sighting
from meta.cycle.reconcile.ownership import Claims
from meta.model.clusters import cluster_of, job_ref
from meta.model.durations import utcnow
from slurm_bridge.client import SlurmClient
from slurm_bridge.clusters import unreachable_clusters
from slurm_bridge.parse.sacct import SacctJob
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.states import Outcome
from slurm_bridge.tags import AttemptTag, parse_tag

# another site's name is remembered for the log line only: a few are enough, however many a
# user invents in comments of their own jobs
_MAX_SITES_NAMED = 16


@dataclass
class Observation:
    """Observation is one period's batched read of Slurm, indexed by attempt id."""

    at: datetime
    listed: list[SqueueJob] = field(default_factory=list)  # squeue's rows as read (calm.py compares them)
    squeue: dict[str, list[Sighting]] = field(default_factory=dict)
    sacct: dict[str, list[Sighting]] = field(default_factory=dict)
    calls: int = 0
    accounting_read: bool = True  # False: sacct was skipped, so no attempt may be concluded absent
    # tagged jobs that are not the attempt's (another user's), by (attempt id, Slurm job id)
    spoofed: dict[tuple[str, str], Sighting] = field(default_factory=dict)
    # jobs with a tag older than sites naming no attempt of this store: not ours, left alone
    unclaimed: dict[tuple[str, str], Sighting] = field(default_factory=dict)
    # jobs (squeue rows and sacct records) whose tag names another site, and those sites
    foreign: int = 0
    foreign_sites: set[str] = field(default_factory=set)
    # clusters that did not answer (several clusters), with seconds dark: their attempts are not judged from this read
    dark: dict[str, float] = field(default_factory=dict)
    # live attempts whose recorded Slurm job is on a dark cluster: no accounting read is made for them
    on_dark: set[str] = field(default_factory=set)
    # the attempts whose squeue and sacct sightings ``screen`` looked at already
    _screened_squeue: set[str] = field(default_factory=set)
    _screened_sacct: set[str] = field(default_factory=set)

    def screen(self, claims: Claims, only: Collection[str] | None = None) -> None:
        """screen sets aside the sightings that are not their attempt's job (of the attempts in ``only``, or all).

        An attempt's sightings in one index are screened once: the reconciler screens the live
        attempts' squeue rows before deciding on sacct, then every attempt named; a claim read
        later only ever adds the recorded job, so screening the same rows again found nothing more
        (and cost ~15 ms a period at 10,000 running, issue 24).
        """
        for index, done in ((self.squeue, self._screened_squeue), (self.sacct, self._screened_sacct)):
            for attempt_id in [a for a in index if (only is None or a in only) and a not in done]:
                done.add(attempt_id)
                claim = claims.of(attempt_id)
                stored = claims.stored(attempt_id)
                kept = []
                for sighting in index[attempt_id]:
                    if sighting.legacy and not stored:
                        self.unclaimed[(attempt_id, sighting.slurm_job_id)] = sighting
                    elif claim.owns(sighting.slurm_job_id, sighting.uid, sighting.user):
                        kept.append(sighting)
                    else:
                        self.spoofed[(attempt_id, sighting.slurm_job_id)] = sighting
                if kept:
                    index[attempt_id] = kept
                else:
                    del index[attempt_id]  # as if Slurm showed nothing of the attempt

    def sightings(self, attempt_id: str) -> list[Sighting]:
        """sightings are the attempt's jobs in squeue, else in sacct."""
        return self.squeue.get(attempt_id) or self.sacct.get(attempt_id) or []

    def accounted(self, attempt_id: str, slurm_job_id: str) -> Sighting | None:
        """accounted is sacct's record of one job of the attempt (None: not read, or not there yet)."""
        return next((s for s in self.sacct.get(attempt_id, []) if s.slurm_job_id == slurm_job_id), None)


def _ours(tag: AttemptTag | None, site: str, observation: Observation) -> bool:
    """_ours: a tag of this site or of none (legacy, judged by ``screen``); another site's is counted and dropped."""
    if tag is None:
        return False
    if tag.other_site(site):
        observation.foreign += 1
        if len(observation.foreign_sites) < _MAX_SITES_NAMED:
            observation.foreign_sites.add(tag.site)  # type: ignore[arg-type] - other_site: not None
        return False
    return True


def _index_squeue(
    jobs: list[SqueueJob], site: str, observation: Observation, rows: ListedRows | None = None
) -> dict[str, list[Sighting]]:
    index: dict[str, list[Sighting]] = {}
    parsed = (rows or ListedRows()).parse([job for job in jobs if job.het_job_offset in (None, 0)])
    for tag, sighting in parsed:  # a het-job is followed through its leader component
        if sighting is None or not _ours(tag, site, observation):
            continue
        assert tag is not None
        index.setdefault(tag.attempt_id, []).append(sighting)
    return index


def _index_sacct(records: Iterable[SacctJob], site: str, observation: Observation) -> dict[str, list[Sighting]]:
    index: dict[str, list[Sighting]] = {}
    for record in records:
        if record.step is not None or record.het_offset not in (None, 0):
            continue
        tag = parse_tag(record.name, record.comment)
        if not _ours(tag, site, observation):
            continue
        assert tag is not None
        index.setdefault(tag.attempt_id, []).append(
            Sighting(job_ref(record.base_job_id, record.cluster), record.observed, record.nodes, "sacct", record.state_by_uid, record.uid,
                     legacy=tag.site is None)  # fmt: skip
        )
    return index


def observe(
    client: SlurmClient,
    since: datetime | Callable[[], datetime],
    live_ids: Iterable[str] | None = None,
    claims: Claims | None = None,
    *,
    site: str,
    listed: list[SqueueJob] | None = None,
    rows: ListedRows | None = None,
) -> Observation:
    """observe reads squeue, then sacct unless every one of ``live_ids`` is in squeue or on a dark cluster (None: always).

    Raises SlurmError if a read fails. ``since`` may be a callable: the sacct window is then
    worked out only when sacct is read. Jobs tagged by another site than ``site`` are dropped as
    they are read. With ``claims``, squeue is screened first: another user's job carrying a live
    attempt's tag does not make its accounting read unneeded. ``listed``: squeue's rows, already
    read this period (the calm check read them). ``rows``: the last listing's parsed rows
    (listed.py), kept by the caller from period to period.
    """
    now = utcnow()
    observation = Observation(at=now, calls=1, listed=client.squeue() if listed is None else listed)
    observation.squeue = _index_squeue(observation.listed, site, observation, rows)
    observation.dark = unreachable_clusters(client)
    if claims is not None:  # the live attempts' claims: the others are screened by the reconciler
        observation.screen(claims, only=claims.claims)
    live_ids = None if live_ids is None else list(live_ids)
    observation.on_dark = _on_dark(live_ids or [], claims, observation.dark)
    # a cancel seen in squeue is read in accounting too: only sacct says who cancelled
    if live_ids is not None and all(
        attempt_id in observation.on_dark
        or (attempt_id in observation.squeue and not _cancelled(observation.squeue[attempt_id]))
        for attempt_id in live_ids
    ):
        observation.accounting_read = False
        return observation
    start = since() if callable(since) else since
    observation.sacct = _index_sacct(client.sacct(start), site, observation)
    observation.dark.update(unreachable_clusters(client))
    observation.calls += 1
    return observation


def _on_dark(live_ids: Iterable[str], claims: Claims | None, dark: Mapping[str, float]) -> set[str]:
    """_on_dark are the live attempts whose recorded Slurm job is on a dark cluster.

    They are not judged while it is dark, and the dark cluster's accounting is not read: a
    sacct of the other clusters, every period, would tell nothing about them (issue 26: it
    tripled the periods of a cut-off cluster's pair).
    """
    if not dark or claims is None:
        return set()
    return {a for a in live_ids if (job := claims.of(a).slurm_job_id) and cluster_of(job) in dark}


def _cancelled(sightings: list[Sighting]) -> bool:
    """_cancelled: one of the sightings is a job Slurm cancelled."""
    return any(s.observed.outcome == Outcome.CANCELLED for s in sightings)

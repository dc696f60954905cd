"""For step 4 (reconcile), listed rows: each squeue row's tag and sighting, parsed once while squeue lists it unchanged.

Slurm keeps listing a job for ``MinJobAge`` after it ended, so after a long run squeue lists as
many ended jobs as running ones, and most rows are the very rows of the last period. Parsing
every row's tag and state again cost ~5 µs a row (0.1 s at 20,000 rows, issue 24); a row is
now parsed only when one of the fields its sighting is made of changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from meta.model.clusters import job_ref
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.states import Observed, map_state
from slurm_bridge.tags import AttemptTag, parse_tag


@dataclass(frozen=True)
class Sighting:
    """Sighting is one Slurm job seen for an attempt: its id, nodes and mapped state."""

    slurm_job_id: str
    observed: Observed
    nodes: tuple[str, ...]
    source: str  # "squeue" | "sacct"
    cancelled_by: int | None = None  # sacct's ``CANCELLED by <uid>``
    uid: int | None = None  # the uid the job runs as (squeue's UserId, sacct's UID)
    user: str = ""  # its login name, where only that was read
    legacy: bool = False  # its tag names no site (older than issue 26): ours only if the attempt is stored


Parsed = tuple[AttemptTag | None, Sighting | None]  # (the row's tag, its sighting: None when untagged)


def row_key(job: SqueueJob) -> tuple:
    """row_key is every field of a row that its tag or sighting is made of."""
    return (job.job_id, job.cluster, job.name, job.comment, job.state, job.exit_code, job.signal, job.nodes,
            job.user_id, job.user_name, job.het_job_offset)  # fmt: skip


def parse_row(job: SqueueJob) -> Parsed:
    """parse_row is a row's tag and its sighting (the tag names the attempt; the caller judges whose it is)."""
    tag = parse_tag(job.name, job.comment)
    if tag is None:
        return None, None
    observed = map_state(job.state, job.exit_code, job.signal)
    sighting = Sighting(job_ref(job.job_id, job.cluster), observed, job.nodes, "squeue", uid=job.user_id,
                        user=job.user_name, legacy=tag.site is None)  # fmt: skip
    return tag, sighting


class ListedRows:
    """ListedRows keeps the last squeue's parsed rows, so a row listed again unchanged is not parsed again."""

    def __init__(self) -> None:
        self._parsed: dict[tuple, Parsed] = {}

    def parse(self, jobs: list[SqueueJob]) -> list[Parsed]:
        """parse is each row's (tag, sighting), in order; only the rows of this listing are kept for the next."""
        kept: dict[tuple, Parsed] = {}
        known = self._parsed
        out: list[Parsed] = []
        for job in jobs:
            key = row_key(job)
            parsed = known.get(key)
            if parsed is None:
                parsed = parse_row(job)
            kept[key] = parsed
            out.append(parsed)
        self._parsed = kept
        return out

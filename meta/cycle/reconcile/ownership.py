"""For step 4 (reconcile), ownership: which tagged Slurm jobs are an attempt's, since a tag alone proves nothing.

Everyone can read a job's comment in squeue, so anyone can submit a job whose comment names
another user's attempt (issue 22). A tagged job is an attempt's only when its Slurm id is the
one recorded for the attempt, or it runs as the user the attempt runs as: its job's owner, or
the daemon's own user for jobs without one (as ``launch_plan.run_as_for`` decides). A job that
fails both is another user's, and the reconciler never follows or cancels it for the attempt.
Jobs tagged by another metasched site never get here (``observe.py`` drops them as it reads);
a tag older than sites is judged here only when its attempt is in this store.
"""

from __future__ import annotations

import pwd
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.store.chunks import among, chunked
from meta.store.models import Attempt, Job


@dataclass(frozen=True)
class Claim:
    """Claim is what makes a Slurm job one attempt's: its recorded id, or the uid it runs as."""

    slurm_job_id: str | None
    uid: int
    tenant: str | None = None  # for the audit row of a spoofed job (None: no such attempt)

    def owns(self, slurm_job_id: str, uid: int | None, user: str) -> bool:
        """owns: the job is the recorded one, or runs as the attempt's user (a job of unknown user is not)."""
        if self.slurm_job_id is not None and slurm_job_id == self.slurm_job_id:
            return True
        if uid is not None:
            return uid == self.uid
        return bool(user) and uid_of(user) == self.uid


class Claims:
    """Claims are the claims of the attempts an observation names; an attempt not in the store runs as the daemon."""

    def __init__(self, claims: Mapping[str, Claim], daemon_uid: int) -> None:
        self.claims = dict(claims)
        self.daemon_uid = daemon_uid

    def of(self, attempt_id: str) -> Claim:
        """of is the attempt's claim; a tag naming no stored attempt is ours only as the daemon's own job."""
        return self.claims.get(attempt_id) or Claim(None, self.daemon_uid)

    def stored(self, attempt_id: str) -> bool:
        """stored: the attempt is in this store (a tag older than sites is ours only then)."""
        return attempt_id in self.claims

    @classmethod
    def load(
        cls, session: Session, attempt_ids: Iterable[str], daemon_uid: int, known: ClaimCache | None = None
    ) -> Claims:
        """load reads the recorded Slurm id, run-as uid and tenant of each attempt, a slice at a time.

        Claims in ``known`` are not read again, and the final ones read now are added to it.
        """
        wanted = set(attempt_ids)
        claims: dict[str, Claim] = known.pick(wanted) if known is not None else {}
        for chunk in chunked(sorted(wanted.difference(claims))):
            rows = session.execute(
                select(Attempt.id, Attempt.slurm_job_id, Job.owner_uid, Job.tenant)
                .join(Job, Job.id == Attempt.job_id)
                .where(among(session, Attempt.id, chunk))
            )
            for row in rows:
                uid = row.owner_uid if row.owner_uid is not None else daemon_uid
                claims[row.id] = Claim(row.slurm_job_id, uid, row.tenant)
        if known is not None:
            known.add(claims)
        return cls(claims, daemon_uid)


class ClaimCache:
    """ClaimCache keeps the claims that can no longer change, so a period reads only new attempts'.

    A claim is final once the attempt's Slurm id is recorded: the id is written once, and the
    job's owner and tenant never change. At 10,000 running attempts reading every claim twice a
    period cost about 0.4 s (issue 24).
    """

    def __init__(self) -> None:
        self._final: dict[str, Claim] = {}

    def pick(self, attempt_ids: Iterable[str]) -> dict[str, Claim]:
        """pick is the cached claims among ``attempt_ids``."""
        return {a: claim for a in attempt_ids if (claim := self._final.get(a)) is not None}

    def add(self, claims: Mapping[str, Claim]) -> None:
        """add keeps the final ones among ``claims``."""
        self._final.update((a, claim) for a, claim in claims.items() if claim.slurm_job_id is not None)

    def keep(self, attempt_ids: Iterable[str]) -> None:
        """keep forgets the claims of attempts no longer followed."""
        wanted = set(attempt_ids)
        self._final = {a: claim for a, claim in self._final.items() if a in wanted}


@lru_cache(maxsize=1024)
def uid_of(user: str) -> int | None:
    """uid_of is the uid of a login name (squeue's JSON shows a name; None: no such user here)."""
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None

"""How a Slurm job carries its metasched identity: the comment ``metasched:site=<site>:attempt=<id>``.

Slurm job ids are not identities (they wrap and requeue), so reconciliation and the lookup
after an unknown launch outcome match jobs by this tag. The job name is the user's (``-J``, as
under sbatch: squeue's NAME and ``SLURM_JOB_NAME`` are what the user chose), so the tag lives in
the comment: squeue's default columns do not show it, accounting stores it
(``AccountingStoreFlags=job_comment``), and unlike ``--wckey`` it needs no ``TrackWCKey`` nor a
wckey association per user. Everyone may read a comment, so it holds ids only: they name a job,
they prove nothing (whose job it is rests on the Unix user it runs as, ``meta/cycle/reconcile/ownership.py``).

The site is the store's id (``meta/store/site.py``, random at its first start): two metasched
instances sharing a cluster (production and staging) each follow, count and cancel only jobs
whose tag names their own site, and leave the other's alone. Compatibility, oldest first:

- jobs launched before issue 13 were named ``ms-<attempt>`` and are still recognised by that
  name when their comment is lost;
- comments older than issue 12 carry the fencing token (``:token=N``), still read;
- comments older than issue 26 have no site (``metasched:attempt=<id>``): ``parse_tag`` returns
  ``site=None`` and the reconciler takes such a job as its own only when the attempt is in its
  store (an upgrade keeps following what it launched before), otherwise it leaves it alone.

A site id or attempt id out of bounds makes the comment no tag at all, never a legacy one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from meta.model.ids import SITE_ID, check_site_id

JOB_NAME_PREFIX = "ms-"
COMMENT_PREFIX = "metasched:"
# fullmatch with ASCII classes: ``$`` would accept a final newline, ``\d`` any Unicode digit
_ATTEMPT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# Also accepts "metasched site=<s> attempt=<id> token=<n>" (spaces), as hand-written test jobs use.
_COMMENT = re.compile(
    rf"metasched[: ](?:site=(?P<site>{SITE_ID.pattern})[: ])?attempt=(?P<attempt>[A-Za-z0-9_.-]+)"
    r"(?:[: ]token=(?P<token>[0-9]{1,19}))?"
)


@dataclass(frozen=True, slots=True)
class AttemptTag:
    """AttemptTag is the attempt id, its site (None: a comment older than issue 26) and, from jobs older than issue 12, the fencing token."""

    attempt_id: str
    fencing_token: int | None
    site: str | None = None

    def other_site(self, site: str) -> bool:
        """other_site: the tag names a site, and it is not ``site`` (a legacy tag names none)."""
        return self.site is not None and self.site != site


def check_attempt_id(attempt_id: str) -> str:
    """check_attempt_id returns ``attempt_id`` if it is safe in a job name and comment, else raises."""
    if not _ATTEMPT_ID.fullmatch(attempt_id):
        raise ValueError(f"attempt id {attempt_id!r} must match {_ATTEMPT_ID.pattern}")
    return attempt_id


def job_name(attempt_id: str) -> str:
    """job_name is the legacy ``ms-<attempt>`` name: the Slurm name of an attempt whose job has no name."""
    return f"{JOB_NAME_PREFIX}{check_attempt_id(attempt_id)}"


def tag_key(name: str, job_comment: str) -> str:
    """tag_key is ``ms-<attempt>`` for a metasched job (read from its comment, whatever its site), else its plain name."""
    tag = parse_tag(name, job_comment)
    return f"{JOB_NAME_PREFIX}{tag.attempt_id}" if tag else name


def comment(site: str, attempt_id: str) -> str:
    """comment is the Slurm job comment of an attempt: its site and id only (squeue shows it to everyone)."""
    return f"{COMMENT_PREFIX}site={check_site_id(site)}:attempt={check_attempt_id(attempt_id)}"


# every live job's tag is read again each period (10,000 running: ~30 ms of regular expressions); a tag is immutable
@lru_cache(maxsize=1 << 16)
def parse_tag(name: str, job_comment: str) -> AttemptTag | None:
    """parse_tag reads the site and attempt back from a job's comment, or the attempt from its name if the comment is lost."""
    match = _COMMENT.fullmatch(job_comment.strip())
    if match:
        attempt = match.group("attempt")
        if not _ATTEMPT_ID.fullmatch(attempt):
            return None
        token = match.group("token")
        return AttemptTag(attempt, int(token) if token is not None else None, match.group("site"))
    if name.startswith(JOB_NAME_PREFIX) and _ATTEMPT_ID.fullmatch(name[len(JOB_NAME_PREFIX) :]):
        return AttemptTag(name[len(JOB_NAME_PREFIX) :], None)
    return None

"""How a Slurm job carries its metasched identity: the comment ``metasched:attempt=<id>``.

Slurm job ids are not identities (they wrap and requeue), so reconciliation and the lookup
after an unknown launch outcome match jobs by this tag. The job name is the user's (``-J``, as
under sbatch: squeue's NAME and ``SLURM_JOB_NAME`` are what the user chose), so the tag lives in
the comment: squeue's default columns do not show it, accounting stores it
(``AccountingStoreFlags=job_comment``), and unlike ``--wckey`` it needs no ``TrackWCKey`` nor a
wckey association per user. Everyone may read a comment, so it holds the attempt id only: an id
names an attempt, it proves nothing. Jobs launched before issue 13 were named ``ms-<attempt>``
and are still recognised by that name when their comment is lost; comments older than issue 12
(``:token=N``) are still read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

JOB_NAME_PREFIX = "ms-"
COMMENT_PREFIX = "metasched:"
# fullmatch with ASCII classes: ``$`` would accept a final newline, ``\d`` any Unicode digit
_ATTEMPT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# Also accepts "metasched attempt=<id> token=<n>" (spaces), as hand-written test jobs use.
_COMMENT = re.compile(r"metasched[: ]attempt=(?P<attempt>[A-Za-z0-9_.-]+)(?:[: ]token=(?P<token>[0-9]{1,19}))?")


@dataclass(frozen=True, slots=True)
class AttemptTag:
    """AttemptTag is the attempt id (and, from jobs older than issue 12, the fencing token) read back from a Slurm job."""

    attempt_id: str
    fencing_token: int | None


def check_attempt_id(attempt_id: str) -> str:
    """check_attempt_id returns ``attempt_id`` if it is safe in a job name and comment, else raises."""
    if not _ATTEMPT_ID.fullmatch(attempt_id):
        raise ValueError(f"attempt id {attempt_id!r} must match {_ATTEMPT_ID.pattern}")
    return attempt_id


def job_name(attempt_id: str) -> str:
    """job_name is the legacy ``ms-<attempt>`` name: the Slurm name of an attempt whose job has no name."""
    return f"{JOB_NAME_PREFIX}{check_attempt_id(attempt_id)}"


def tag_key(name: str, job_comment: str) -> str:
    """tag_key is ``ms-<attempt>`` for a metasched job (read from its comment), else its plain name."""
    tag = parse_tag(name, job_comment)
    return f"{JOB_NAME_PREFIX}{tag.attempt_id}" if tag else name


def comment(attempt_id: str) -> str:
    """comment is the Slurm job comment of an attempt: its id only (squeue shows it to everyone)."""
    return f"{COMMENT_PREFIX}attempt={check_attempt_id(attempt_id)}"


def parse_tag(name: str, job_comment: str) -> AttemptTag | None:
    """parse_tag reads the attempt back from a job's comment, or from its name if the comment is lost."""
    match = _COMMENT.fullmatch(job_comment.strip())
    if match:
        token = match.group("token")
        return AttemptTag(match.group("attempt"), int(token) if token is not None else None)
    if name.startswith(JOB_NAME_PREFIX) and _ATTEMPT_ID.fullmatch(name[len(JOB_NAME_PREFIX) :]):
        return AttemptTag(name[len(JOB_NAME_PREFIX) :], None)
    return None

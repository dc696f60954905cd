"""dependency reads sbatch's ``--dependency`` syntax into conditions between metasched jobs.

The grammar is sbatch's (Slurm 22.05 man page):

- ``TYPE:JOB[:JOB...]`` for ``after`` (``JOB+MINUTES`` waits that long after the start),
  ``afterany``, ``afterok``, ``afternotok``, ``aftercorr`` (array element to array element);
  ``singleton`` alone;
- several conditions joined by ``,`` (all must hold) or by ``?`` (any one is enough), never both.

Jobs are metasched job ids as msbatch prints them (``j4k9x2m7``) or full job UUIDs. What
metasched cannot honour is refused by name: ``afterburstbuffer`` (no burst buffers), ``expand``
(heterogeneous growth), array elements (``JOB_3``). The parsed
form is plain data (no pydantic), so the thin CLI can use it too; ``normalise`` is the canonical
text the spec stores.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

MAX_DEPENDENCY_CHARS = 4_096
MAX_CONDITIONS = 64  # Slurm has no bound; a dependency naming more jobs belongs in a singleton or a chain
MAX_DELAY_MIN = 365 * 24 * 60  # +time is minutes: a year at most, like every other duration

# a short id (``j`` and 8 of the id alphabet) or a UUID; anything else is refused
_JOB_REF = re.compile(r"j[0-9a-hjkmnp-tv-z]{4,16}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DIGITS = re.compile(r"[0-9]{1,9}")


class DependencyType(StrEnum):
    """DependencyType is one sbatch dependency type that metasched honours."""

    AFTER = "after"  # the job started (or was cancelled), plus an optional delay
    AFTER_ANY = "afterany"  # the job ended in any state
    AFTER_OK = "afterok"  # the job completed successfully
    AFTER_NOT_OK = "afternotok"  # the job ended in a failed state (failed, timed out, cancelled)
    AFTER_CORR = "aftercorr"  # the same-index element of the named array succeeded (else the whole job)
    SINGLETON = "singleton"  # no other job of the same name and user runs or waits ahead


# refused types, with the reason the user reads
_REFUSED = {
    "afterburstbuffer": "metasched has no burst buffers",
    "expand": "metasched jobs cannot grow into other jobs",
}


@dataclass(frozen=True, slots=True)
class Condition:
    """Condition is one (type, job, delay) triple; ``job`` is None for singleton."""

    type: DependencyType
    job: str | None = None
    delay_s: float = 0.0

    def render(self) -> str:
        """render is the condition in sbatch syntax (``after:j4k9x2m7+5``)."""
        if self.job is None:
            return self.type.value
        delay = f"+{int(self.delay_s // 60)}" if self.delay_s else ""
        return f"{self.type.value}:{self.job}{delay}"


@dataclass(frozen=True, slots=True)
class Dependency:
    """Dependency is a parsed ``--dependency``: conditions that must all (or, with ``any_of``, one) hold."""

    conditions: tuple[Condition, ...]
    any_of: bool = False

    def jobs(self) -> tuple[str, ...]:
        """jobs lists the job references, each once, in the order written."""
        return tuple(dict.fromkeys(c.job for c in self.conditions if c.job is not None))

    def corresponding(self) -> bool:
        """corresponding tells whether a condition is ``aftercorr`` (decided element by element)."""
        return any(c.type is DependencyType.AFTER_CORR for c in self.conditions)

    def singleton(self) -> bool:
        """singleton tells whether one of the conditions is ``singleton``."""
        return any(c.type is DependencyType.SINGLETON for c in self.conditions)

    def normalise(self) -> str:
        """normalise is the canonical text: one condition per job, joined by ``,`` or ``?``."""
        return ("?" if self.any_of else ",").join(c.render() for c in self.conditions)


class DependencyError(ValueError):
    """DependencyError is a ``--dependency`` metasched cannot read or honour (one line)."""


def _conditions(item: str) -> list[Condition]:
    """_conditions reads one ``TYPE:JOB[+MIN][:JOB...]`` item (or ``singleton``)."""
    kind, _, rest = item.partition(":")
    kind = kind.strip().lower()
    if kind in _REFUSED:
        raise DependencyError(f"{kind} is not supported: {_REFUSED[kind]}")
    try:
        dep_type = DependencyType(kind)
    except ValueError:
        known = ", ".join(t.value for t in DependencyType)
        raise DependencyError(f"unknown dependency type {kind[:40]!r} (use {known})") from None
    if dep_type is DependencyType.SINGLETON:
        if rest:
            raise DependencyError("singleton takes no job ids")
        return [Condition(dep_type)]
    if not rest:
        raise DependencyError(f"{kind} needs at least one job id ({kind}:JOB[:JOB...])")
    return [_condition(dep_type, word) for word in rest.split(":")]


def _condition(dep_type: DependencyType, word: str) -> Condition:
    job, plus, minutes = word.strip().partition("+")
    if plus and dep_type is not DependencyType.AFTER:
        raise DependencyError(f"+time is for 'after' only, not {dep_type.value}:{word[:60]}")
    if plus and (not _DIGITS.fullmatch(minutes) or int(minutes) > MAX_DELAY_MIN):
        raise DependencyError(f"bad delay in {word[:60]!r}: after:JOB+MINUTES, at most {MAX_DELAY_MIN}")
    if "_" in job:
        raise DependencyError(f"array elements ({job[:60]}) are not supported as dependencies")
    if not _JOB_REF.fullmatch(job.lower()):
        raise DependencyError(f"{job[:60]!r} is not a metasched job id (as msbatch prints it, e.g. j4k9x2m7)")
    return Condition(dep_type, job.lower(), float(int(minutes) * 60) if plus else 0.0)


@lru_cache(maxsize=4096)
def parse_dependency(text: str) -> Dependency:
    """parse_dependency reads sbatch's dependency syntax; a problem raises DependencyError."""
    if len(text) > MAX_DEPENDENCY_CHARS:
        raise DependencyError(f"the dependency is longer than {MAX_DEPENDENCY_CHARS} characters")
    body = text.strip()
    if not body:
        raise DependencyError("the dependency is empty")
    if "," in body and "?" in body:
        raise DependencyError("use either ',' (all) or '?' (any) between dependencies, not both")
    any_of = "?" in body
    conditions: list[Condition] = []
    for item in body.split("?" if any_of else ","):
        if not item.strip():
            raise DependencyError("an empty dependency between separators")
        conditions.extend(_conditions(item))
        if len(conditions) > MAX_CONDITIONS:
            raise DependencyError(f"more than {MAX_CONDITIONS} job dependencies")
    unique = tuple(dict.fromkeys(conditions))  # the same condition twice is the same condition
    return Dependency(unique, any_of)

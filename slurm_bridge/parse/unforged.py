"""unforged: keep only the rows of a free-text read that an id-only read of the same jobs vouches for.

A job name may hold a newline and the field separator, so one user's name can print whole rows of
its own in squeue's ``--Format`` or sacct's ``-P`` output (another job id, user, state, metasched
tag; issue 22, S3). The id-only read has no free text: a row whose id it lacks, or whose id is on
more than one row (the real row and a copy), is not trusted.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

log = logging.getLogger("metasched.slurm")
Row = TypeVar("Row")


def unforged_rows(rows: Sequence[Row], ids: set, key: Callable[[Row], Hashable], read: str) -> list[Row]:
    """unforged_rows drops rows whose ``key`` is not in ``ids`` or is on two rows, logging the ids dropped."""
    count = Counter(key(row) for row in rows)
    kept = [row for row in rows if key(row) in ids and count[key(row)] == 1]
    if len(kept) != len(rows):
        dropped = sorted(set(count) - {key(row) for row in kept})
        log.warning("%s: dropping %d rows a job name forged or copied (job ids %s)", read, len(rows) - len(kept),
                    dropped[:10])  # fmt: skip
    return kept

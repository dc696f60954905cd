"""sbatch's filename patterns (``-o/-e``): expand the ones only metasched knows, keep the rest for Slurm.

Slurm expands ``%j %x %u %N %A %a ...`` itself when the job starts, and ``%%`` is a literal
``%``; a digit between ``%`` and the letter zero-pads a number (``%4a`` → ``0007``); a pattern
with a backslash is not expanded at all. Some values exist only in metasched (an array job's id
and an element's index, since each element is its own Slurm job): ``expand_patterns`` replaces
exactly the letters it is given and leaves every other pattern, ``%%`` included, to Slurm, so
one pattern is expanded once and the same way sbatch would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# %, an optional zero-pad width, one letter (or the literal %%)
_PATTERN = re.compile(r"%(%|(\d*)([A-Za-z]))")


def expand_patterns(pattern: str, values: Mapping[str, str]) -> str:
    """expand_patterns replaces the ``%X`` patterns whose letter is in ``values``; everything else stays."""
    if "\\" in pattern:
        return pattern  # sbatch: a backslash anywhere turns expansion off

    def one(match: re.Match[str]) -> str:
        if match.group(1) == "%":
            return "%%"  # Slurm turns it into one %; expanding it here would expand it twice
        width, letter = match.group(2), match.group(3)
        value = values.get(letter)
        if value is None:
            return match.group(0)
        if width and value.isdigit():
            return value.zfill(min(int(width), 10))  # Slurm caps the padding at 10 digits
        return value

    return _PATTERN.sub(one, pattern)


def array_pattern_values(array_job_id: str, index: int) -> dict[str, str]:
    """array_pattern_values are ``%A`` (the array's id) and ``%a`` (the element's index) of one element."""
    return {"A": array_job_id, "a": str(index)}

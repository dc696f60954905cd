"""squeue's ``-O/--Format`` for msqueue: ``Field[:[.][size][suffix]],...`` over the same fields as ``-o``.

A field is 20 columns wide unless a size is given (``Name:`` alone: as wide as its value), left-justified (``.`` right-justifies), with
nothing between fields but the suffix after each, as squeue prints them. Field names are
squeue's, case-insensitive: JobID, Name, UserName, Account, Partition, State, StateCompact,
TimeUsed, TimeLimit, NumNodes, ReasonList, NodeList, SubmitTime, ArrayJobID, ArrayTaskID and
Cluster (the cluster a job is on: ``msqueue -M``).
"""

from __future__ import annotations

import re

from cli.sbatch.squeue_format import FormatError, Part

DEFAULT_WIDTH = 20  # squeue's
LONG_FIELDS = {
    "jobid": "i", "name": "j", "username": "u", "account": "a", "partition": "P", "state": "T",
    "statecompact": "t", "timeused": "M", "timelimit": "l", "numnodes": "D", "reasonlist": "R",
    "nodelist": "N", "submittime": "V", "arrayjobid": "F", "arraytaskid": "K", "cluster": "cluster",
}  # fmt: skip
_ITEM = re.compile(r"(?P<name>[A-Za-z]+)(?::(?P<dot>\.?)(?P<size>\d*)(?P<suffix>.*))?", re.S)


def parse_long_format(text: str) -> list[Part]:
    """parse_long_format turns an ``-O`` list into the parts ``render_line`` prints (FormatError on an unknown field)."""
    parts: list[Part] = []
    for item in text.split(","):
        match = _ITEM.fullmatch(item.strip(" ") if ":" not in item else item.lstrip(" "))
        letter = LONG_FIELDS.get(match.group("name").lower()) if match else None
        if match is None or letter is None:
            known = ", ".join(LONG_FIELDS)
            raise FormatError(f"Invalid job format specification: {item} (msqueue knows {known})")
        size = match.group("size")
        # no ":" is squeue's 20 columns; a ":" without a size is the value as it is
        width = int(size) if size else (None if ":" in item else DEFAULT_WIDTH)
        parts.append(Part(field=letter, right=bool(match.group("dot")), width=width))
        if match.group("suffix"):
            parts.append(Part(text=match.group("suffix")))
    return parts

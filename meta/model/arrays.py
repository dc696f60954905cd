"""Array jobs as Slurm users write them: element ids (``JOB_3``, ``JOB_[1-3,5]``), squeue's collapsed ranges, SLURM_ARRAY_*.

An array job is one metasched job whose tasks are its elements, each named by its array index.
metasched places every element as its own Slurm job, so Slurm never makes an array id for them:
the array's id is the metasched job's short id (what msbatch prints) and ``SLURM_ARRAY_JOB_ID``,
``%A`` and element ids use it. Standard library only: the thin CLI imports this.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAX_ARRAY_INDEX = 4_000_000  # Slurm's largest MaxArraySize is 4000001 (indexes 0..4000000)
_RANGE = re.compile(r"(?P<first>\d{1,7})(?:-(?P<last>\d{1,7})(?::(?P<step>\d{1,7}))?)?")
_ELEMENT = re.compile(r"(?P<job>[^_\s\[\]]+)_(?:(?P<one>\d{1,7})|\[(?P<set>[0-9,:\-]{1,4096})(?:%\d{1,7})?\]|(?P<all>\*))")


@dataclass(frozen=True, slots=True)
class ElementRef:
    """ElementRef is a job reference and, for ``JOB_3`` / ``JOB_[1-3]``, the array indexes it names (None: the whole job)."""

    job: str
    indexes: tuple[int, ...] | None = None


def parse_index_set(text: str, limit: int = 20_000) -> tuple[int, ...]:
    """parse_index_set expands ``1-3,5,8-12:2`` into sorted unique indexes (ValueError names the bad item)."""
    indexes: set[int] = set()
    for item in text.split(","):
        match = _RANGE.fullmatch(item.strip())
        if not match:
            raise ValueError(f"bad array index {item.strip()!r} (use e.g. 3, 1-3, 1,3,5 or 0-15:2)")
        first = int(match.group("first"))
        last = int(match.group("last") or first)
        step = int(match.group("step") or 1)
        if last < first or step < 1 or last > MAX_ARRAY_INDEX:
            raise ValueError(f"bad array range {item.strip()!r}")
        if (last - first) // step + 1 + len(indexes) > limit:
            raise ValueError(f"more than {limit} array indexes")
        indexes.update(range(first, last + 1, step))
    return tuple(sorted(indexes))


def parse_element_ref(ref: str) -> ElementRef:
    """parse_element_ref splits ``JOB_3``, ``JOB_[1-3,5]`` (squeue's ``JOB_[1-3%2]`` too) or ``JOB_*`` (the whole job) from ``JOB``."""
    text = ref.strip()
    match = _ELEMENT.fullmatch(text)
    if match is None:
        return ElementRef(text)
    if match.group("all"):
        return ElementRef(match.group("job"))
    if match.group("one") is not None:
        return ElementRef(match.group("job"), (int(match.group("one")),))
    return ElementRef(match.group("job"), parse_index_set(match.group("set")))


def element_id(job: str, index: int) -> str:
    """element_id is one element's id as squeue and scancel write it: ``JOB_3``."""
    return f"{job}_{index}"


def compress_indexes(indexes: Iterable[int]) -> str:
    """compress_indexes writes indexes as squeue does: ``0-3,7,9-10`` (runs of consecutive indexes)."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    start = previous = None
    for index in [*ordered, None]:
        if start is not None and (index is None or index != previous + 1):
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = None
        if index is not None and start is None:
            start = index
        previous = index
    return ",".join(parts)


def collapsed_id(job: str, indexes: Sequence[int], throttle: int | None) -> str:
    """collapsed_id is squeue's id for an array's waiting elements: ``JOB_[2-7%2]`` (``JOB_5`` for one without a throttle)."""
    if len(indexes) == 1 and throttle is None:
        return element_id(job, indexes[0])
    suffix = f"%{throttle}" if throttle is not None else ""
    return f"{job}_[{compress_indexes(indexes)}{suffix}]"


def text_step(text: str) -> int:
    """text_step is SLURM_ARRAY_TASK_STEP as sbatch 22.05 sets it: the first ``:step`` written in ``--array``, else 1.

    Measured on the dev cluster: ``0-6:2`` and ``0-6:2,10`` give 2, ``1,20-26:3`` gives 3,
    ``0-4:2,10-30:5`` gives 2 and ``2,4,6`` gives 1 (the text's step, not the indexes' stride).
    """
    steps = re.findall(r":(\d{1,7})", text.partition("%")[0])
    return max(int(steps[0]), 1) if steps else 1


def array_variables(array_id: str, index: int, indexes: Sequence[int], step: int = 1) -> dict[str, str]:
    """array_variables are the SLURM_ARRAY_* variables sbatch gives element ``index`` of an array."""
    return {
        "SLURM_ARRAY_JOB_ID": array_id,
        "SLURM_ARRAY_TASK_ID": str(index),
        "SLURM_ARRAY_TASK_COUNT": str(len(indexes)),
        "SLURM_ARRAY_TASK_MIN": str(min(indexes)),
        "SLURM_ARRAY_TASK_MAX": str(max(indexes)),
        "SLURM_ARRAY_TASK_STEP": str(step),
    }

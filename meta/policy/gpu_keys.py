"""GPU keys: how GPUs of a type count against quotas — under their type and under "*" (any type)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

ANY = "*"


def keys_of(gpu_type: str | None) -> tuple[str, ...]:
    """keys_of are the quota keys GPUs of a type count against: the type's own (if typed) and "*"."""
    return ((gpu_type,) if gpu_type else ()) + (ANY,)


def count(used: dict[str, int], gpu_type: str | None, gpus: int) -> None:
    """count adds ``gpus`` of a type to a usage table under every key they count against."""
    if gpus:
        for key in keys_of(gpu_type):
            used[key] += gpus


def gpu_capacity(types: Iterable[str | None], gpus: Iterable[int]) -> dict[str, int]:
    """gpu_capacity totals every node's GPUs per type and under "*".

    Down and drained nodes count too: usage counts the work still on them, so a limit at this
    total is reached only when no node has room left for the job.
    """
    out: dict[str, int] = defaultdict(int)
    for gpu_type, n in zip(types, gpus, strict=True):
        if n:
            if gpu_type:
                out[gpu_type] += n
            out[ANY] += n
    return dict(out)

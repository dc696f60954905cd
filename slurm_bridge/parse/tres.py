"""GRES and TRES strings: ``gpu:a100:8``, ``gpu:t4:2(IDX:0-1)``, ``cpu=1,mem=2000M,gres/gpu:a100=2``."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from meta.model.resources import parse_memory_mib
from slurm_bridge.errors import SlurmParseError

_EMPTY = {"", "(null)", "N/A", "none"}
_GRES = re.compile(
    r"^(?:gres[:/])?(?P<name>[A-Za-z_][\w.-]*)(?::(?P<type>[^:()=]+))?(?::(?P<count>\d+))?(?P<extra>\(.*\))?$"
)
_INDEX_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass(frozen=True, slots=True)
class Gres:
    """Gres is one generic resource entry such as 8 ``gpu`` of type ``a100``."""

    name: str
    type: str | None
    count: int
    indices: tuple[int, ...] = ()


def split_top_level(value: str, separator: str = ",") -> list[str]:
    """split_top_level splits on ``separator`` outside parentheses (``gpu:t4:3(IDX:0-1,3)``)."""
    items, depth, current = [], 0, []
    for char in value:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == separator and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


# squeue and sacct repeat the same few strings across hundreds of jobs: parse each once. The
# results are frozen (Tres's dicts are never written after parsing), so sharing them is safe.
@functools.lru_cache(maxsize=4096)
def parse_gres(value: str | None) -> tuple[Gres, ...]:
    """parse_gres reads ``gpu:a100:8``, ``gpu:8``, ``gres:gpu:a100:2`` or ``gpu:t4:2(IDX:0-1)``."""
    if value is None or value.strip() in _EMPTY:
        return ()
    return tuple(_parse_one_gres(item) for item in split_top_level(value))


def _parse_one_gres(item: str) -> Gres:
    """_parse_one_gres reads one comma-free GRES entry."""
    match = _GRES.match(item)
    if not match:
        raise SlurmParseError(f"bad GRES {item!r}")
    gres_type, count = match.group("type"), match.group("count")
    if gres_type is not None and gres_type.isdigit() and count is None:
        gres_type, count = None, gres_type  # "gpu:8" is a count, not a type
    return Gres(
        name=match.group("name"),
        type=gres_type.lower() if gres_type else None,
        count=int(count) if count is not None else 1,
        indices=_parse_indices(match.group("extra") or ""),
    )


def _parse_indices(extra: str) -> tuple[int, ...]:
    """_parse_indices reads ``(IDX:0-1,3)`` into ``(0, 1, 3)``; ``(IDX:N/A)`` and ``(S:0-1)`` give ()."""
    if not extra.startswith("(IDX:"):
        return ()
    body = extra[len("(IDX:") : -1]
    indices: list[int] = []
    for part in body.split(","):
        match = _INDEX_RANGE.match(part.strip())
        if match:
            low = int(match.group(1))
            indices.extend(range(low, int(match.group(2) or low) + 1))
    return tuple(indices)


def gpus_by_type(gres: Iterable[Gres]) -> dict[str | None, int]:
    """gpus_by_type sums ``gpu`` entries per type (None = untyped)."""
    totals: dict[str | None, int] = {}
    for entry in gres:
        if entry.name == "gpu":
            totals[entry.type] = totals.get(entry.type, 0) + entry.count
    return totals


@dataclass(frozen=True, slots=True)
class Tres:
    """Tres is a parsed TRES string: cpus, memory, nodes, billing and GPUs per type."""

    cpus: int = 0
    memory_mib: int = 0
    nodes: int = 0
    billing: int = 0
    gpus: int = 0
    gpus_by_type: dict[str, int] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)

    @property
    def gpu_type(self) -> str | None:
        """gpu_type is the single GPU type named, or None when none or several are named."""
        return next(iter(self.gpus_by_type)) if len(self.gpus_by_type) == 1 else None


@functools.lru_cache(maxsize=4096)
def parse_tres(value: str | None) -> Tres:
    """parse_tres reads ``cpu=1,mem=2000M,node=1,billing=1,gres/gpu=2,gres/gpu:a100=2``."""
    if value is None or value.strip() in _EMPTY:
        return Tres()
    raw: dict[str, str] = {}
    for item in split_top_level(value):
        key, sep, amount = item.partition("=")
        if not sep or not key:
            raise SlurmParseError(f"bad TRES entry {item!r} in {value!r}")
        raw[key.strip()] = amount.strip()
    typed = {
        key.split(":", 1)[1].lower(): _count(amount, value)
        for key, amount in raw.items()
        if key.startswith("gres/gpu:")
    }
    return Tres(
        cpus=_count(raw.get("cpu", "0"), value),
        memory_mib=_memory(raw.get("mem", "0"), value),
        nodes=_count(raw.get("node", "0"), value),
        billing=_count(raw.get("billing", "0"), value),
        gpus=_count(raw.get("gres/gpu", str(sum(typed.values()))), value),
        gpus_by_type=typed,
        raw=raw,
    )


def _memory(amount: str, whole: str) -> int:
    """_memory reads a TRES memory amount such as ``2000M`` or ``250G`` into MiB."""
    try:
        return parse_memory_mib(amount)
    except ValueError as error:
        raise SlurmParseError(f"bad TRES memory {amount!r} in {whole!r}") from error


def _count(amount: str, whole: str) -> int:
    """_count reads an integer TRES amount."""
    try:
        return int(float(amount))
    except ValueError as error:
        raise SlurmParseError(f"bad TRES amount {amount!r} in {whole!r}") from error

"""values parses the values of sbatch options: counts, sizes, GPU requests, arrays, signals.

Every parser takes the option's text and returns a typed value or raises ``ValueError`` with
a message that says what is accepted; the caller adds the option name and where it came from.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from meta.model.durations import parse_slurm_time_s
from meta.model.limits import MAX_TASKS_PER_JOB
from meta.model.sizes import parse_memory_mib

MAX_ARRAY_TASKS = MAX_TASKS_PER_JOB  # the spec's partition limit; also stops "0-999999999" from eating memory

# Used with fullmatch (a bare "$" also matches before a trailing newline) and ASCII (Python's
# "\d" is any Unicode digit, e.g. "٨", which int() reads as 8 and Slurm refuses).
_GPU_REQUEST = re.compile(r"(?:(?P<type>[A-Za-z0-9_.-]*[A-Za-z_.-][A-Za-z0-9_.-]*):)?(?P<count>\d+)", re.ASCII)
_ARRAY_RANGE = re.compile(r"(?P<first>\d+)(?:-(?P<last>\d+)(?::(?P<step>\d+))?)?", re.ASCII)
_SIGNAL = re.compile(r"(?:(?P<flags>[RB]+):)?(?P<sig>[A-Za-z0-9]+)(?:@(?P<secs>\d+))?", re.ASCII)
_DEFAULT_SIGNAL_GRACE_S = 60  # sbatch's default when "@secs" is left out


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """GpuRequest is a GPU count with an optional type (None = any type)."""

    count: int
    gpu_type: str | None = None


@dataclass(frozen=True, slots=True)
class ArrayRequest:
    """ArrayRequest is an expanded ``--array``: the sorted unique indexes and the ``%N`` limit."""

    indexes: tuple[int, ...]
    max_parallel: int | None = None


@dataclass(frozen=True, slots=True)
class SignalRequest:
    """SignalRequest is a parsed ``--signal``: the signal name, grace seconds and whom to signal."""

    name: str
    grace_s: int
    batch_only: bool
    reservation: bool

    def normalised(self) -> str:
        """normalised renders the request back in sbatch's syntax, e.g. ``B:USR1@90``."""
        flags = ("R" if self.reservation else "") + ("B" if self.batch_only else "")
        return f"{flags + ':' if flags else ''}{self.name}@{self.grace_s}"


def is_number(text: str) -> bool:
    """is_number tells whether ``text`` is ASCII digits only (str.isdigit also takes "٣" and "²")."""
    return text.isascii() and text.isdigit()


def parse_count(text: str, minimum: int = 1) -> int:
    """parse_count reads a whole number of at least ``minimum``."""
    value = text.strip()
    if not is_number(value) or int(value) < minimum:
        raise ValueError(f"expected a whole number >= {minimum}")
    return int(value)


def parse_nodes(text: str) -> int:
    """parse_nodes reads ``-N``: a count, or a range whose ends agree (a gang has a fixed size)."""
    first, dash, last = text.strip().partition("-")
    count = parse_count(first)
    if dash and parse_count(last) != count:
        raise ValueError("node ranges (min-max) are not supported: a training gang has a fixed size")
    return count


def parse_size_mib(text: str) -> int:
    """parse_size_mib reads a Slurm memory size (default unit MB; K, M, G, T suffixes) in MiB."""
    mib = parse_memory_mib(text)
    if mib <= 0:
        # --mem=0 means "all memory of the node" in Slurm, which metasched cannot reserve
        raise ValueError(
            "give a positive amount such as 64G (0, meaning a whole node's memory, is not supported)"
        )
    return mib


def parse_time_s(text: str) -> float:
    """parse_time_s reads sbatch's ``--time`` formats into seconds."""
    seconds = parse_slurm_time_s(text)
    if seconds <= 0:
        raise ValueError("the time limit must be positive")
    return seconds


def parse_gpu_request(text: str) -> GpuRequest:
    """parse_gpu_request reads ``--gpus``/``--gpus-per-node``: ``[type:]count``."""
    match = _GPU_REQUEST.fullmatch(text.strip())
    if not match:
        raise ValueError("expected [type:]count, e.g. 8 or a100:8")
    count = int(match.group("count"))
    if count < 1:
        raise ValueError("the GPU count must be at least 1")
    return GpuRequest(count, match.group("type") or None)


def parse_gres(text: str) -> GpuRequest:
    """parse_gres reads ``--gres``: exactly one ``gpu[:type][:count]`` entry (count 1 when left out)."""
    entries = [entry.strip() for entry in text.split(",") if entry.strip()]
    others = [entry for entry in entries if entry.split(":")[0] != "gpu"]
    if others:
        raise ValueError(f"only gpu GRES is supported, not {', '.join(others)}")
    if len(entries) != 1:
        raise ValueError("expected one gpu[:type][:count] entry")
    parts = entries[0].split(":")[1:]
    if len(parts) > 2 or any(not part for part in parts):
        raise ValueError("expected gpu[:type][:count], e.g. gpu:a100:8")
    if parts and is_number(parts[-1]):
        gpu_type = parts[0] if len(parts) == 2 else None
        return _positive_gpus(int(parts[-1]), gpu_type)
    if len(parts) == 2:
        raise ValueError("expected gpu[:type][:count] with a numeric count, e.g. gpu:a100:8")
    return GpuRequest(1, parts[0] if parts else None)


def _positive_gpus(count: int, gpu_type: str | None) -> GpuRequest:
    if count < 1:
        raise ValueError("the GPU count must be at least 1")
    return GpuRequest(count, gpu_type)


def _expand_range(item: str) -> range:
    match = _ARRAY_RANGE.fullmatch(item)
    if not match:
        raise ValueError(f"bad array element {item!r} (use e.g. 0-15, 1,3,5, 0-15:2 or 0-15%4)")
    first = int(match.group("first"))
    last = int(match.group("last") or first)
    step = int(match.group("step") or 1)
    if last < first or step < 1:
        raise ValueError(f"bad array range {item!r}: the end is before the start or the step is 0")
    if (last - first) // step + 1 > MAX_ARRAY_TASKS:
        raise ValueError(f"array range {item!r} has more than {MAX_ARRAY_TASKS} indexes")
    return range(first, last + 1, step)


def parse_array(text: str) -> ArrayRequest:
    """parse_array expands ``--array`` (``0-15``, ``1,3,5``, ``0-15:2``, ``...%N``) into indexes."""
    body, percent, limit = text.strip().partition("%")
    max_parallel = parse_count(limit) if percent else None
    indexes: set[int] = set()
    for item in body.split(","):
        indexes.update(_expand_range(item.strip()))
        if len(indexes) > MAX_ARRAY_TASKS:
            raise ValueError(f"the array has more than {MAX_ARRAY_TASKS} indexes")
    return ArrayRequest(tuple(sorted(indexes)), max_parallel)  # sorted and unique, like Slurm's bitmap


def _signal_name(text: str) -> str:
    """_signal_name normalises ``10``, ``USR1`` or ``SIGUSR1`` to ``USR1``."""
    if is_number(text):
        try:
            return signal.Signals(int(text)).name.removeprefix("SIG")
        except ValueError:
            raise ValueError(f"unknown signal number {text}") from None
    name = text.upper().removeprefix("SIG")
    if f"SIG{name}" not in signal.Signals.__members__:
        raise ValueError(f"unknown signal {text!r} (use e.g. USR1, TERM or 10)")
    return name


def parse_signal(text: str) -> SignalRequest:
    """parse_signal reads ``--signal=[{R|B}:]SIG[@secs]`` (grace 60 s when left out, as sbatch)."""
    match = _SIGNAL.fullmatch(text.strip())
    if not match:
        raise ValueError("expected [{R|B}:]SIG[@secs], e.g. B:USR1@90")
    flags = match.group("flags") or ""
    grace = int(match.group("secs")) if match.group("secs") else _DEFAULT_SIGNAL_GRACE_S
    if grace > 0xFFFF:
        raise ValueError("the signal time must be at most 65535 seconds")
    return SignalRequest(_signal_name(match.group("sig")), grace, "B" in flags, "R" in flags)

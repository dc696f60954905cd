"""Memory sizes as Slurm and job files write them (``256Gi``, ``4000M``, bare MiB), parsed without pydantic.

Kept apart from ``meta.model.resources`` so that msbatch's translation (client side, on the API
path) can parse ``--mem`` without importing the spec models.
"""

from __future__ import annotations

import math
import re
from typing import Any

_MEMORY_UNITS = {
    "": 1,  # bare numbers are MiB, as Slurm's --mem
    "k": 1 / 1024,
    "kb": 1 / 1024,
    "ki": 1 / 1024,
    "kib": 1 / 1024,
    "m": 1,
    "mb": 1,
    "mi": 1,
    "mib": 1,
    "g": 1024,
    "gb": 1024,
    "gi": 1024,
    "gib": 1024,
    "t": 1024 * 1024,
    "tb": 1024 * 1024,
    "ti": 1024 * 1024,
    "tib": 1024 * 1024,
}
_MAX_MIB = 1024**4  # 1024 PiB: anything larger is a typo, and int() of it must not overflow
# ASCII digits only: ``\d`` would take any Unicode digit ("１２G"), which Slurm never would
_QUANTITY = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*")


def parse_memory_mib(value: Any) -> int:
    """parse_memory_mib turns ``256Gi``, ``4000M``, ``1.5T`` or a number (MiB) into MiB."""
    if isinstance(value, bool):
        raise ValueError("memory must be a size such as 4000M or 256Gi, not a boolean")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value > _MAX_MIB:
            raise ValueError("memory must be a finite size (at most 1024 PiB)")
        if value < 0:
            raise ValueError("memory must not be negative")
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"memory must be a size such as 4000M or 256Gi, got {type(value).__name__}")
    match = _QUANTITY.fullmatch(value)
    if not match or match.group(2).lower() not in _MEMORY_UNITS:
        raise ValueError(f"cannot parse memory size {value!r} (use e.g. 4000M, 16G, 256Gi)")
    mib = float(match.group(1)) * _MEMORY_UNITS[match.group(2).lower()]
    if not math.isfinite(mib) or mib > _MAX_MIB:
        raise ValueError(f"memory size {value!r} is too large")
    return int(mib)

"""Resource vectors: what a task asks for and what a node offers.

GPU types are kept apart: ``gpus=8, gpu_type="a100"`` never fits into eight H100s.
``gpu_type=None`` in a *request* means "any type"; in a *capacity* it means the node has
no GPUs (or an untyped pool, as in traces that do not name the model).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from meta.model.limits import MAX_CPUS, MAX_GPUS, MAX_STORAGE_GIB, is_slurm_name
from meta.model.sizes import parse_memory_mib

__all__ = ["ResourceError", "ResourceVector", "format_memory", "parse_memory_mib"]

_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def _slurm_name(value: str | None, what: str) -> str | None:
    """_slurm_name refuses a GPU type or network that is not a plain Slurm name (it reaches --gres)."""
    if value is not None and not is_slurm_name(value):
        raise ValueError(f"{what} must be a plain name such as a100 (letters, digits, '.', '_', '-')")
    return value


def format_memory(mib: int) -> str:
    """format_memory renders MiB the way Slurm accepts it (``256G`` or ``4000M``)."""
    if mib and mib % (1024 * 1024) == 0:
        return f"{mib // (1024 * 1024)}T"
    if mib and mib % 1024 == 0:
        return f"{mib // 1024}G"
    return f"{mib}M"


class ResourceError(ValueError):
    """ResourceError is raised by arithmetic that would mix GPU types or go negative."""


class ResourceVector(BaseModel):
    """ResourceVector is an immutable bundle of cpus, memory, typed GPUs, storage and network."""

    cpus: float = Field(default=0, ge=0, le=MAX_CPUS, description="CPU cores")
    memory_mib: int = Field(default=0, ge=0, alias="memory", description="host memory in MiB")
    gpus: int = Field(default=0, ge=0, le=MAX_GPUS, strict=True, description="GPU count")
    gpu_type: str | None = Field(default=None, description="GPU model, None = any type")
    storage_gib: int = Field(default=0, ge=0, le=MAX_STORAGE_GIB, alias="storage", description="local scratch in GiB")
    network: str | None = Field(default=None, description="network class such as 'ib'")

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @field_validator("cpus", mode="before")
    @classmethod
    def _no_bool_cpus(cls, value: Any) -> Any:
        # YAML's true would otherwise be 1 cpu
        if isinstance(value, bool):
            raise ValueError("cpus must be a number, not a boolean")
        return value

    @field_validator("memory_mib", mode="before")
    @classmethod
    def _parse_memory(cls, value: Any) -> int:
        return parse_memory_mib(value)

    @field_validator("storage_gib", mode="before")
    @classmethod
    def _parse_storage(cls, value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError("storage must be a size such as 100G, not a boolean")
        if isinstance(value, str):
            text = value.strip()
            # a bare number means GiB here, as for the numeric form
            return parse_memory_mib(text + "Gi" if _NUMBER.fullmatch(text) else text) // 1024
        return value

    @field_validator("gpu_type")
    @classmethod
    def _normalise_gpu_type(cls, value: str | None) -> str | None:
        name = value.strip().lower() or None if value is not None else None
        return _slurm_name(name, "gpu_type")

    @field_validator("network")
    @classmethod
    def _network_name(cls, value: str | None) -> str | None:
        return _slurm_name(value, "network")

    # --- arithmetic -------------------------------------------------------------------------

    def _gpu_type_with(self, other: ResourceVector) -> str | None:
        """_gpu_type_with returns the common GPU type or raises when the two disagree."""
        if not self.gpus or not other.gpus:
            return self.gpu_type if self.gpus else other.gpu_type
        if self.gpu_type != other.gpu_type:
            raise ResourceError(f"cannot combine {self.gpu_type} and {other.gpu_type} GPUs")
        return self.gpu_type

    def __add__(self, other: ResourceVector) -> ResourceVector:
        """__add__ sums two vectors of the same GPU type."""
        return ResourceVector.model_construct(
            cpus=self.cpus + other.cpus,
            memory_mib=self.memory_mib + other.memory_mib,
            gpus=self.gpus + other.gpus,
            gpu_type=self._gpu_type_with(other),
            storage_gib=self.storage_gib + other.storage_gib,
            network=self.network or other.network,
        )

    def __sub__(self, other: ResourceVector) -> ResourceVector:
        """__sub__ removes ``other`` from this vector; it never goes below zero.

        An untyped request (any GPU type) taken from typed capacity keeps the capacity's type,
        as ``fits_in`` lets it fit there.
        """
        gpu_type = self.gpu_type if other.gpu_type is None else self._gpu_type_with(other)
        result = {
            "cpus": self.cpus - other.cpus,
            "memory_mib": self.memory_mib - other.memory_mib,
            "gpus": self.gpus - other.gpus,
            "storage_gib": self.storage_gib - other.storage_gib,
        }
        negative = [name for name, amount in result.items() if amount < 0]
        if negative:
            raise ResourceError(f"subtraction goes negative in {', '.join(negative)}")
        return ResourceVector.model_construct(gpu_type=gpu_type, network=self.network, **result)

    def scale(self, factor: int) -> ResourceVector:
        """scale multiplies every amount by ``factor`` (e.g. per-worker × workers)."""
        return ResourceVector.model_construct(
            cpus=self.cpus * factor,
            memory_mib=self.memory_mib * factor,
            gpus=self.gpus * factor,
            gpu_type=self.gpu_type,
            storage_gib=self.storage_gib * factor,
            network=self.network,
        )

    def fits_in(self, capacity: ResourceVector) -> bool:
        """fits_in tells whether this request fits into ``capacity`` (type and network included)."""
        if self.gpus and self.gpu_type is not None and self.gpu_type != capacity.gpu_type:
            return False
        if self.network is not None and self.network != capacity.network:
            return False
        return (
            self.cpus <= capacity.cpus
            and self.memory_mib <= capacity.memory_mib
            and self.gpus <= capacity.gpus
            and self.storage_gib <= capacity.storage_gib
        )

    def is_zero(self) -> bool:
        """is_zero tells whether the vector asks for nothing."""
        return not (self.cpus or self.memory_mib or self.gpus or self.storage_gib)

    def describe(self) -> str:
        """describe renders a short human form such as ``8 cpu, 64G, 4×a100``."""
        parts = []
        if self.cpus:
            parts.append(f"{self.cpus:g} cpu")
        if self.memory_mib:
            parts.append(format_memory(self.memory_mib))
        if self.gpus:
            parts.append(f"{self.gpus}×{self.gpu_type or 'gpu'}")
        if self.storage_gib:
            parts.append(f"{self.storage_gib}G disk")
        if self.network:
            parts.append(self.network)
        return ", ".join(parts) or "nothing"


ZERO = ResourceVector()

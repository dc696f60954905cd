"""A worker node as the inventory knows it: configured capacity, health, partitions and leaf switch."""

from __future__ import annotations

from dataclasses import dataclass

from meta.model.resources import ResourceVector


@dataclass(frozen=True, slots=True)
class NodeState:
    """NodeState is one worker node: configured capacity, health, partitions and leaf switch."""

    name: str
    capacity: ResourceVector
    partitions: tuple[str, ...] = ()
    switch: str | None = None
    healthy: bool = True
    drained: bool = False
    features: frozenset[str] = frozenset()

    def schedulable(self) -> bool:
        """schedulable tells whether new work may be placed here."""
        return self.healthy and not self.drained

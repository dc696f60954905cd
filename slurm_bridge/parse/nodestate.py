"""Node state words: ``idle`` + ``["DRAIN"]`` (sinfo json), ``IDLE+DRAIN`` or ``DOWN*`` (scontrol)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Base states that already say "drained" or "failed" on their own (sinfo's long names).
_DRAIN_BASES = {"DRAIN", "DRAINED", "DRAINING"}
# POWERED_DOWN is not here: Slurm powers such nodes up on demand, so their capacity is real.
_UNHEALTHY_FLAGS = {"DOWN", "NOT_RESPONDING", "FAIL", "FAILING", "INVALID_REG", "POWERING_DOWN"}
_UNHEALTHY_BASES = {"DOWN", "FAIL", "FUTURE", "UNKNOWN", "ERROR"}


@dataclass(frozen=True, slots=True)
class NodeCondition:
    """NodeCondition is a node's base state plus flags, with the health questions the scheduler asks."""

    base: str
    flags: frozenset[str]

    @property
    def healthy(self) -> bool:
        """healthy is False for down, failing, not responding, powered-down or unknown nodes."""
        return self.base not in _UNHEALTHY_BASES and not (self.flags & _UNHEALTHY_FLAGS)

    @property
    def drained(self) -> bool:
        """drained is True for DRAIN / DRAINING / DRAINED (no new work, running work continues)."""
        return self.base in _DRAIN_BASES or "DRAIN" in self.flags or bool(self.flags & _DRAIN_BASES)

    @property
    def reserved(self) -> bool:
        """reserved is True while a Slurm reservation covers the node."""
        return "RESERVED" in self.flags


def node_condition(state: str | Iterable[str], flags: Iterable[str] = ()) -> NodeCondition:
    """node_condition normalises every node-state spelling Slurm prints into a NodeCondition."""
    words = [state] if isinstance(state, str) else list(state)
    parts = [part for word in words for part in str(word).upper().split("+") if part]
    all_flags = {str(flag).upper() for flag in flags}
    base = ""
    for part in parts:
        if part.endswith("*"):
            # "IDLE*" in scontrol/sinfo text: the node is not responding.
            all_flags.add("NOT_RESPONDING")
            part = part.rstrip("*")
        if not base:
            base = part
        else:
            all_flags.add(part)
    return NodeCondition(base or "UNKNOWN", frozenset(all_flags))

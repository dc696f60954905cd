"""Parse ``sinfo --json`` (openapi v0.0.38): one SinfoNode per node, deduplicated."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.nodestate import NodeCondition, node_condition
from slurm_bridge.parse.squeue import api_errors
from slurm_bridge.parse.tres import Gres, parse_gres
from slurm_bridge.parse.values import number, text


@dataclass(frozen=True, slots=True)
class SinfoNode:
    """SinfoNode is one node's configuration, allocation and health as sinfo reports it."""

    name: str
    state: str
    condition: NodeCondition
    gres: tuple[Gres, ...]
    gres_used: tuple[Gres, ...]
    cpus: int
    alloc_cpus: int
    real_memory_mib: int
    alloc_memory_mib: int
    partitions: tuple[str, ...]
    features: frozenset[str]
    reason: str
    tmp_disk_mib: int = 0
    free_memory_mib: int | None = None
    cpu_load: float | None = None
    address: str = ""
    port: int | None = None

    @property
    def healthy(self) -> bool:
        """healthy is False for down / not responding / failed nodes."""
        return self.condition.healthy

    @property
    def drained(self) -> bool:
        """drained is True for nodes that accept no new work."""
        return self.condition.drained

    @property
    def schedulable(self) -> bool:
        """schedulable tells whether new work may be placed on the node."""
        return self.healthy and not self.drained


def parse_sinfo_json(payload: str | bytes) -> list[SinfoNode]:
    """parse_sinfo_json reads ``nodes`` of ``sinfo --json``, merging duplicates by name."""
    try:
        document = json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SlurmParseError(f"sinfo --json: not JSON ({error})") from error
    if isinstance(document, dict):
        api_errors(document, "sinfo --json")
    nodes = document.get("nodes") if isinstance(document, dict) else None
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        errors = document.get("errors") if isinstance(document, dict) else None
        raise SlurmParseError(f"sinfo --json: {errors or 'no nodes list'}")
    return dedupe([_node(entry) for entry in nodes])


def dedupe(nodes: list[SinfoNode]) -> list[SinfoNode]:
    """dedupe keeps one record per node name (sinfo repeats nodes per partition), uniting partitions."""
    merged: dict[str, SinfoNode] = {}
    for node in nodes:
        seen = merged.get(node.name)
        if seen is None:
            merged[node.name] = node
        else:
            partitions = tuple(dict.fromkeys(seen.partitions + node.partitions))
            merged[node.name] = replace(seen, partitions=partitions)
    return list(merged.values())


def _features(value: Any) -> frozenset[str]:
    """_features reads ``a100,nvlink`` (or a list) into a set."""
    raw = value if isinstance(value, list) else text(value).split(",")
    return frozenset(str(item).strip() for item in raw if str(item).strip())


def _node(entry: dict[str, Any]) -> SinfoNode:
    """_node builds one SinfoNode; a node without a name is garbage."""
    name = text(entry.get("name"))
    if not name:
        raise SlurmParseError(f"sinfo --json: node without name: {str(entry)[:200]}")
    state = entry.get("state") or ""
    condition = node_condition(state, entry.get("state_flags") or ())
    load = number(entry.get("cpu_load"))
    partitions = entry.get("partitions") or []
    return SinfoNode(
        name=name,
        state=text(state).upper(),
        condition=condition,
        gres=parse_gres(text(entry.get("gres"))),
        gres_used=parse_gres(text(entry.get("gres_used"))),
        cpus=number(entry.get("cpus"), 0) or 0,
        alloc_cpus=number(entry.get("alloc_cpus"), 0) or 0,
        real_memory_mib=number(entry.get("real_memory"), 0) or 0,
        alloc_memory_mib=number(entry.get("alloc_memory"), 0) or 0,
        partitions=tuple(partitions if isinstance(partitions, list) else text(partitions).split(",")),
        features=_features(entry.get("active_features") or entry.get("features")),
        reason=text(entry.get("reason")),
        tmp_disk_mib=number(entry.get("temporary_disk"), 0) or 0,
        free_memory_mib=number(entry.get("free_memory")),
        # v0.0.38 reports the load average in hundredths.
        cpu_load=load / 100 if load is not None else None,
        address=text(entry.get("address")),
        port=number(entry.get("port")),
    )

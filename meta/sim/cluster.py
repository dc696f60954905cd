"""Cluster specs: node groups with GPUs and switch layout, loaded from YAML presets or files.

A spec is given as a preset name (``philly``, ``philly150``, ``pai2023``, ``crux``, ``a100h100``), a
YAML file path, or a uniform shorthand ``NxG`` (e.g. ``150x8`` = 150 nodes of 8 untyped GPUs, one leaf
switch per 16 nodes). A group may sit on a named Slurm cluster (``cluster:``, issue 26): its node and
switch names are then ``cluster/name`` (``meta.model.clusters.qualify``); without one, names are bare
and the site is one cluster, as before. ``scaled(s)`` makes a cluster contended without touching the trace: it
multiplies every group's node count by ``s`` (rounded; groups that round to zero vanish), or,
when every group is one leaf switch (Crux), keeps evenly spread whole switches.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from meta.model.clusters import check_cluster_name, qualify
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector, parse_memory_mib

PRESET_DIR = Path(__file__).parent / "presets"
_UNIFORM = re.compile(r"^\s*(\d+)\s*x\s*(\d+)(?::([\w.-]+))?\s*$")
_SPLIT = re.compile(r"^(.+)@(\d+)$")  # "philly150@2": the cluster cut into 2 Slurm clusters by node count


class ClusterError(ValueError):
    """ClusterError is raised for an unknown preset or an invalid cluster file."""


class NodeGroup(BaseModel):
    """NodeGroup is ``count`` identical nodes, optionally cut into leaf switches."""

    model_config = ConfigDict(extra="forbid")

    name: str
    count: int = Field(ge=0)
    gpus: int = Field(default=8, ge=0)
    gpu_type: str | None = None
    cpus: float = Field(default=64, ge=0)
    memory_mib: int = Field(default=512 * 1024, alias="memory", ge=0)
    switch: str | None = None  # every node of the group sits under this leaf switch
    switch_size: int | None = Field(default=None, ge=1)  # or: one leaf per this many nodes
    switch_parent: str | None = None  # parent (spine) of the group's leaf switches
    partitions: list[str] = Field(default_factory=list)
    cluster: str | None = None  # the Slurm cluster of the group's nodes: qualifies node and switch names

    @field_validator("memory_mib", mode="before")
    @classmethod
    def _memory(cls, value: object) -> int:
        return parse_memory_mib(value)

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str | None) -> str | None:
        return None if value is None else check_cluster_name(value)

    def qualified(self, name: str) -> str:
        """qualified is ``name`` (a node or switch of this group) as ``cluster/name``, bare without a cluster."""
        return qualify(self.cluster or "", name)

    def switch_of(self, index: int) -> str | None:
        """switch_of names the leaf switch of the group's ``index``-th node."""
        if self.switch:
            return self.qualified(self.switch)
        if self.switch_size:
            return self.qualified(f"{self.name}-sw{index // self.switch_size}")
        return None


class ClusterSpec(BaseModel):
    """ClusterSpec describes a simulated cluster: node groups, switch tree and tenant shares."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    warmup_hours: float = Field(default=0.0, ge=0)
    node_groups: list[NodeGroup]
    switch_parent: dict[str, str] = Field(default_factory=dict)  # spine -> core, ...
    tenants: dict[str, float] = Field(default_factory=dict)  # tenant -> fair-share weight
    notes: list[str] = Field(default_factory=list)
    scale: float = 1.0

    def total_gpus(self) -> int:
        """total_gpus is the number of GPUs over all nodes."""
        return sum(group.count * group.gpus for group in self.node_groups)

    def node_count(self) -> int:
        """node_count is the number of nodes over all groups."""
        return sum(group.count for group in self.node_groups)

    def max_gpus_per_node(self) -> int:
        """max_gpus_per_node is the GPU count of the largest node (the gang worker size)."""
        return max((group.gpus for group in self.node_groups if group.count), default=0)

    def cluster_names(self) -> list[str]:
        """cluster_names lists the Slurm clusters the groups name, in order ([] for a one-cluster site)."""
        return list(dict.fromkeys(g.cluster for g in self.node_groups if g.cluster))

    def gpus_by_type(self) -> dict[str, int]:
        """gpus_by_type sums GPUs per model ("untyped" for None)."""
        totals: dict[str, int] = {}
        for group in self.node_groups:
            key = group.gpu_type or "untyped"
            if group.gpus and group.count:
                totals[key] = totals.get(key, 0) + group.count * group.gpus
        return totals

    def scaled(self, factor: float) -> ClusterSpec:
        """scaled shrinks (or grows) the cluster by ``factor``: whole switches when groups are switches."""
        if factor <= 0:
            raise ClusterError("cluster scale must be positive")
        if factor == 1:
            return self
        if factor < 1 and all(g.switch for g in self.node_groups):
            groups = self._whole_switches(factor)
        else:
            groups = [g.model_copy(update={"count": int(round(g.count * factor))}) for g in self.node_groups]
        if not any(g.count for g in groups):
            biggest = max(range(len(groups)), key=lambda i: self.node_groups[i].count)
            groups[biggest] = groups[biggest].model_copy(update={"count": 1})
        return self.model_copy(update={"node_groups": [g for g in groups if g.count], "scale": self.scale * factor})

    def _whole_switches(self, factor: float) -> list[NodeGroup]:
        """_whole_switches keeps evenly spread whole leaf switches until ``factor`` of the nodes remain.

        Rounding each small ToR's host count would leave one host per switch and destroy the
        topology that gang placement is judged on; dropping whole switches keeps it.
        """
        target = round(self.node_count() * factor)
        groups = self.node_groups
        stride = max(1, round(1 / factor))
        order = [i for start in range(stride) for i in range(start, len(groups), stride)]
        kept: list[int] = []
        total = 0
        for i in order:
            if total >= target:
                break
            kept.append(i)
            total += groups[i].count
        return [groups[i] for i in sorted(kept)]

    def iter_nodes(self) -> Iterator[NodeState]:
        """iter_nodes yields one NodeState per node, named ``<group>-<index>`` (``cluster/`` before it on a cluster)."""
        for group in self.node_groups:
            for index in range(group.count):
                yield NodeState(
                    name=group.qualified(f"{group.name}-{index:04d}"),
                    capacity=ResourceVector(
                        cpus=group.cpus, memory_mib=group.memory_mib,
                        gpus=group.gpus, gpu_type=group.gpu_type,
                    ),
                    partitions=tuple(group.partitions),
                    switch=group.switch_of(index),
                )

    def switch_tree(self) -> dict[str, str]:
        """switch_tree maps each leaf switch to its parent, plus the spec's upper levels (per cluster when named)."""
        clusters = self.cluster_names()
        if any(g.cluster is None for g in self.node_groups) or not clusters:
            clusters = [""] + clusters  # groups without a cluster keep the bare upper levels
        # each cluster has its own copy of the upper levels: a switch never joins two clusters
        tree = {qualify(c, child): qualify(c, parent) for c in clusters for child, parent in self.switch_parent.items()}
        for group in self.node_groups:
            if not group.switch_parent:
                continue
            parent = group.qualified(group.switch_parent)
            for index in range(group.count):
                leaf = group.switch_of(index)
                if leaf:
                    tree[leaf] = parent
        return tree


def list_presets() -> list[str]:
    """list_presets names the YAML presets shipped with the simulator."""
    return sorted(path.stem for path in PRESET_DIR.glob("*.yaml"))


def uniform_cluster(nodes: int, gpus: int, gpu_type: str | None = None) -> ClusterSpec:
    """uniform_cluster builds ``nodes`` identical nodes of ``gpus`` GPUs, 16 nodes per leaf."""
    group = NodeGroup(name="n", count=nodes, gpus=gpus, gpu_type=gpu_type, switch_size=16)
    return ClusterSpec(name=f"{nodes}x{gpus}", node_groups=[group], warmup_hours=24)


def load_cluster(ref: str, scale: float = 1.0) -> ClusterSpec:
    """load_cluster resolves a preset name, a YAML path or ``NxG`` (``@N``: split in N clusters) into a ClusterSpec."""
    split = _SPLIT.match(ref)
    if split and not Path(ref).is_file():
        from meta.sim.split import split_clusters  # split builds on this module

        return split_clusters(load_cluster(split.group(1), scale), int(split.group(2)))
    match = _UNIFORM.match(ref)
    if match:
        spec = uniform_cluster(int(match.group(1)), int(match.group(2)), match.group(3))
    else:
        path = PRESET_DIR / f"{ref}.yaml" if (PRESET_DIR / f"{ref}.yaml").is_file() else Path(ref)
        if not path.is_file():
            raise ClusterError(
                f"unknown cluster {ref!r}: not a preset ({', '.join(list_presets())}), "
                "not a file and not NxG (e.g. 150x8)"
            )
        spec = _parse_file(path)
    if spec.node_count() == 0:
        raise ClusterError(f"cluster {ref!r} has no nodes")
    return spec.scaled(scale)


def _parse_file(path: Path) -> ClusterSpec:
    """_parse_file reads and validates one cluster YAML file."""
    try:
        data = yaml.safe_load(path.read_text())
        return ClusterSpec.model_validate(data)
    except (OSError, yaml.YAMLError) as exc:
        raise ClusterError(f"cannot read cluster file {path}: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ClusterError(f"invalid cluster file {path}: {where}: {first['msg']}") from exc


def gang_shape(num_gpus: int, worker_gpus: int) -> tuple[int, int]:
    """gang_shape splits a GPU count into (workers, GPUs per worker) of at most ``worker_gpus``.

    A job larger than one node becomes ceil(gpus / node size) workers sharing the GPUs evenly
    (12 GPUs on 8-GPU nodes → 2 × 6, 48 → 6 × 8), as a user would ask Slurm for ``-N`` nodes.
    """
    if worker_gpus <= 0 or num_gpus <= worker_gpus:
        return 1, num_gpus
    workers = math.ceil(num_gpus / worker_gpus)
    return workers, math.ceil(num_gpus / workers)

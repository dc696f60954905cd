"""Parse ``scontrol show topology`` (topology/tree) into switches, leaf-of-node and parent maps."""

from __future__ import annotations

from dataclasses import dataclass

from slurm_bridge import hostlist
from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.scontrol import parse_kv_line


@dataclass(frozen=True, slots=True)
class Switch:
    """Switch is one switch of the tree: its level (0 = leaf), nodes below it and child switches."""

    name: str
    level: int
    nodes: tuple[str, ...]
    switches: tuple[str, ...] = ()
    link_speed: int | None = None


def parse_topology(text: str) -> dict[str, Switch]:
    """parse_topology reads ``SwitchName=... Level=... Nodes=... Switches=...`` lines, keyed by name."""
    switches: dict[str, Switch] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or not line.startswith("SwitchName="):
            # "No topology information available" and similar notes mean "no tree".
            continue
        record = parse_kv_line(line)
        level = record.get("Level", "0")
        if not level.isdigit():
            raise SlurmParseError(f"bad switch level in {line[:200]!r}")
        name = record["SwitchName"]
        switches[name] = Switch(
            name=name,
            level=int(level),
            nodes=tuple(hostlist.expand(record.get("Nodes", ""))),
            switches=tuple(hostlist.expand(record.get("Switches", ""))),
            link_speed=int(record["LinkSpeed"]) if record.get("LinkSpeed", "").isdigit() else None,
        )
    return switches


def leaf_of_node(switches: dict[str, Switch]) -> dict[str, str]:
    """leaf_of_node maps each node to the lowest-level switch that lists it."""
    leaf: dict[str, tuple[int, str]] = {}
    for switch in switches.values():
        for node in switch.nodes:
            if node not in leaf or switch.level < leaf[node][0]:
                leaf[node] = (switch.level, switch.name)
    return {node: name for node, (_, name) in leaf.items()}


def switch_parents(switches: dict[str, Switch]) -> dict[str, str]:
    """switch_parents maps each switch to the switch that lists it under ``Switches=``."""
    return {child: switch.name for switch in switches.values() for child in switch.switches}

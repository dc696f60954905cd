"""Cycle step 2, inventory: the nodes as Slurm reports them, stored, minus what foreign jobs hold.

Each period reads one ``sinfo --json`` (the switch tree from ``scontrol show topology``, the
QOS names from ``sacctmgr`` only every ``topology_refresh_s``; step 3 syncs the tenants' weights
and GPU limits from Slurm's accounts, ``shares.py``, at the same cadence) into a NodeState list and stores
it, so the submit API can refuse specs no node could ever host, and unknown partitions and QOS. ``effective_nodes`` then removes the capacity Slurm gave to jobs
metasched does not own (plain sbatch): the policy must never plan on it, or it would
double-allocate.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.cycle.snapshot.build import placement_shares, totals_per_node
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.model.states import AttemptState
from meta.store.db import Database
from meta.store.inventory import save_inventory
from meta.store.models import Attempt
from slurm_bridge.client import SlurmClient
from slurm_bridge.errors import SlurmError
from slurm_bridge.inventory import Inventory, InventoryMemo

log = logging.getLogger("metasched.inventory")


class InventoryReader:
    """InventoryReader reads and stores the inventory each period, the switch tree now and then."""

    def __init__(self, db: Database, client: SlurmClient, topology_refresh_s: float):
        self.db = db
        self.client = client
        self.topology_refresh_s = topology_refresh_s
        self._topology: dict = {}
        self._topology_at = 0.0
        self._memo = InventoryMemo()  # nodes sinfo reports unchanged are not converted again

    def read(self) -> Inventory:
        """read calls sinfo (topology and QOS when they are due) and stores the inventory if it changed."""
        now = time.monotonic()
        qos = None
        if not self._topology or now - self._topology_at > self.topology_refresh_s:
            self._topology = self.client.topology()
            self._topology_at = now
            qos = self._qos_names()
        nodes = self.client.sinfo()
        inventory = self._memo.build(nodes, self._topology)
        with self.db.session() as session:
            save_inventory(session, inventory.nodes, inventory.version, inventory.switch_parent, qos)
        return inventory

    def _qos_names(self) -> list[str] | None:
        """_qos_names reads the QOS list; accounting being down only skips the submit-time QOS check."""
        try:
            return self.client.qos_names()
        except SlurmError as exc:
            log.warning("cannot read the QOS list (submit-time QOS checks wait for it): %s", exc)
            return None


def held_per_node(session: Session) -> dict[str, ResourceVector]:
    """held_per_node is what metasched's running and stopping attempts hold on each node."""
    live = [AttemptState.RUNNING.value, AttemptState.STOPPING.value]
    placements = session.scalars(select(Attempt.placement).where(Attempt.state.in_(live)))
    return totals_per_node(share for placement in placements for share in placement_shares(placement))


def effective_nodes(inventory: Inventory, ours: dict[str, ResourceVector]) -> list[NodeState]:
    """effective_nodes removes capacity Slurm gave to jobs metasched does not own (direct sbatch).

    Slurm's allocation on a node minus metasched's own reservations there is foreign work;
    the scheduler must not plan on it, or it would double-allocate.
    """
    usage = {u.node: u for u in inventory.usage}
    nodes = []
    for node in inventory.nodes:
        u = usage.get(node.name)
        mine = ours.get(node.name)
        if u is None:
            nodes.append(node)
            continue
        foreign_cpus = max(0.0, u.allocated.cpus - (mine.cpus if mine else 0.0))
        foreign_mem = max(0, u.allocated.memory_mib - (mine.memory_mib if mine else 0))
        foreign_gpus = max(0, u.allocated.gpus - (mine.gpus if mine else 0))
        if not (foreign_cpus or foreign_mem or foreign_gpus):
            nodes.append(node)  # the usual case: all of Slurm's allocation there is metasched's own
            continue
        cap = node.capacity
        capacity = cap.model_copy(
            update={
                "cpus": max(0.0, cap.cpus - foreign_cpus),
                "memory_mib": max(0, cap.memory_mib - foreign_mem),
                "gpus": max(0, cap.gpus - foreign_gpus),
            }
        )
        nodes.append(
            NodeState(
                node.name, capacity, node.partitions, node.switch, node.healthy, node.drained, node.features
            )
        )
    return nodes

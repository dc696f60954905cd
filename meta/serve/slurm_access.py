"""How ``metasched serve`` reaches Slurm: one cluster as always, or several through one facade (issue 26).

The ``clusters`` setting lists them, each ``NAME``, ``NAME=/path/to/slurm.conf`` or ``NAME=-M``:
the commands for that cluster run with that ``SLURM_CONF``, or with ``-M NAME`` through the
daemon's own slurm.conf (Slurm finds the controller through the shared slurmdbd, so the cluster is
dark while slurmdbd is); a name without either uses the daemon's own slurm.conf, which only one
entry may do. ``auto`` follows slurmdbd's cluster list (``sacctmgr show clusters``) while the
daemon runs: a cluster registered later joins at the next refresh, one no longer listed leaves once
no attempt of this site lives there (``meta/cycle/inventory/members.py``). No entry, or one: a single
cluster, and names stay Slurm's own. Two or more, or ``auto``: ``slurm_bridge.clusters.ClusterSet``
qualifies node, job and reservation names as ``cluster/name``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from meta.model.clusters import check_cluster_name
from slurm_bridge.call_records import CallObserver
from slurm_bridge.client import SlurmClient
from slurm_bridge.clusters import ClusterAccess, ClusterSet, cluster_client
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.errors import SlurmError
from slurm_bridge.runner import CommandRunner

MAX_CLUSTERS = 16
log = logging.getLogger("metasched.clusters")


AUTO = "auto"  # every cluster slurmdbd lists, followed while the daemon runs
BY_NAME = "-M"  # NAME=-M: reached with -M NAME through the daemon's slurm.conf and the shared slurmdbd


@dataclass(frozen=True)
class SiteClusters:
    """SiteClusters is the ``clusters`` setting read: how to reach each listed cluster, and whether to follow slurmdbd."""

    clusters: tuple[ClusterAccess, ...]
    auto: bool = False

    @property
    def several(self) -> bool:
        """several tells whether the site may have more than one cluster (names are then qualified)."""
        return self.auto or len(self.clusters) > 1


def parse_clusters(entries: Sequence[str]) -> SiteClusters:
    """parse_clusters reads the ``clusters`` setting (``auto``, ``NAME``, ``NAME=/abs/slurm.conf``, ``NAME=-M``).

    ValueError for a bad one.
    """
    if len(entries) > MAX_CLUSTERS:
        raise ValueError(f"at most {MAX_CLUSTERS} clusters, got {len(entries)}")
    auto = sum(entry.strip() == AUTO for entry in entries)
    if auto > 1:
        raise ValueError(f"{AUTO!r} is listed twice")
    found = [_access(entry) for entry in entries if entry.strip() != AUTO]
    names = [access.name for access in found]
    if len(set(names)) != len(names):
        raise ValueError(f"a cluster is listed twice: {', '.join(names)}")
    if sum(access.slurm_conf is None and not access.by_name for access in found) > 1:
        raise ValueError("only one cluster may use the daemon's own slurm.conf: give the others "
                         f"NAME=/path/slurm.conf or NAME={BY_NAME}")  # fmt: skip
    return SiteClusters(tuple(found), auto=bool(auto))


def _access(entry: str) -> ClusterAccess:
    """_access reads one entry of the setting (not ``auto``)."""
    name, sep, where = entry.partition("=")
    check_cluster_name(name.strip())
    if sep and where == BY_NAME:
        return ClusterAccess(name.strip(), by_name=True)
    if sep and not where.startswith("/"):
        raise ValueError(f"{entry!r}: the slurm.conf must be an absolute path (or {BY_NAME})")
    return ClusterAccess(name.strip(), where if sep else None)


def slurm_client(entries: Sequence[str], *, bin_dir: str | None, observer: CallObserver | None) -> SlurmClient:
    """slurm_client is the daemon's Slurm: one CLI client, or a ClusterSet over the site's clusters."""
    site = parse_clusters(entries)
    if site.auto:
        return _following(site, bin_dir, observer)
    clients = {access.name: cluster_client(access, bin_dir=bin_dir, observer=observer) for access in site.clusters}
    if len(clients) <= 1:
        return next(iter(clients.values()), None) or CliSlurmClient(CommandRunner(bin_dir=bin_dir, observer=observer))
    return ClusterSet(clients)


def _following(site: SiteClusters, bin_dir: str | None, observer: CallObserver | None) -> ClusterSet:
    """_following is a ClusterSet that follows slurmdbd's cluster list (``clusters: auto``).

    Its home is the listed cluster that uses the daemon's own slurm.conf, else the cluster that
    slurm.conf names (asked once: SlurmError when its controller does not answer). A cluster
    listed with its own slurm.conf is reached through it; any other through ``-M NAME``.
    """
    listed = {access.name: access for access in site.clusters}
    own = next((access.name for access in site.clusters if access.slurm_conf is None and not access.by_name), None)
    if own is None:
        own = CliSlurmClient(CommandRunner(bin_dir=bin_dir, observer=observer)).slurm_config().cluster_name

    def connect(name: str) -> SlurmClient:
        access = listed.get(name) or ClusterAccess(name, by_name=name != own)
        return cluster_client(access, bin_dir=bin_dir, observer=observer)

    clients = {name: connect(name) for name in dict.fromkeys([own, *listed])}
    members = ClusterSet(clients, connect=connect)
    try:
        members.follow_registry()
    except SlurmError as exc:  # slurmdbd down at start: the listed clusters now, the others at the next refresh
        log.warning("cannot read slurmdbd's clusters (sacctmgr show clusters): %s", exc)
    return members

"""How ``metasched serve`` reaches Slurm: one cluster as always, or several through one facade (issue 26).

The ``clusters`` setting lists them, each ``NAME`` or ``NAME=/path/to/slurm.conf``: the commands
for that cluster run with that ``SLURM_CONF``; a name without a file uses the daemon's own (the
cluster its default ``slurm.conf`` names), which only one entry may do. No entry, or one: a single
cluster, and names stay Slurm's own. Two or more: ``slurm_bridge.clusters.ClusterSet`` qualifies
node, job and reservation names as ``cluster/name`` (reaching a cluster with ``-M`` alone, without
its own slurm.conf, is not supported yet).
"""

from __future__ import annotations

from collections.abc import Sequence

from meta.model.clusters import check_cluster_name
from slurm_bridge.call_records import CallObserver
from slurm_bridge.client import SlurmClient
from slurm_bridge.clusters import ClusterAccess, ClusterSet, cluster_client
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.runner import CommandRunner

MAX_CLUSTERS = 16


def parse_clusters(entries: Sequence[str]) -> list[ClusterAccess]:
    """parse_clusters reads the ``clusters`` setting (``NAME`` or ``NAME=/abs/slurm.conf``), or raises ValueError."""
    if len(entries) > MAX_CLUSTERS:
        raise ValueError(f"at most {MAX_CLUSTERS} clusters, got {len(entries)}")
    found: list[ClusterAccess] = []
    for entry in entries:
        name, sep, conf = entry.partition("=")
        check_cluster_name(name.strip())
        if sep and not conf.startswith("/"):
            raise ValueError(f"{entry!r}: the slurm.conf must be an absolute path")
        found.append(ClusterAccess(name.strip(), conf if sep else None))
    names = [access.name for access in found]
    if len(set(names)) != len(names):
        raise ValueError(f"a cluster is listed twice: {', '.join(names)}")
    if sum(access.slurm_conf is None for access in found) > 1:
        raise ValueError("only one cluster may use the daemon's own slurm.conf: give the others NAME=/path/slurm.conf")
    return found


def slurm_client(entries: Sequence[str], *, bin_dir: str | None, observer: CallObserver | None) -> SlurmClient:
    """slurm_client is the daemon's Slurm: one CLI client, or a ClusterSet over one per listed cluster."""
    clusters = parse_clusters(entries)
    clients = {access.name: cluster_client(access, bin_dir=bin_dir, observer=observer) for access in clusters}
    if len(clients) <= 1:
        return next(iter(clients.values()), None) or CliSlurmClient(CommandRunner(bin_dir=bin_dir, observer=observer))
    return ClusterSet(clients)

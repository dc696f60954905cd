"""Cluster-qualified names: one metasched over several Slurm clusters (issue 26).

With one cluster every name is Slurm's own. With several, node, switch, reservation and job
names are ``cluster/name`` everywhere in metasched (the store, the policy, the API): two
clusters may use the same node names and job ids, and Slurm's names never contain ``/``. Only
``slurm_bridge.clusters`` turns them back into a bare name and the cluster to ask.
"""

from __future__ import annotations

import re

SEP = "/"
# 20: a job ref, cluster/id, fits the store's 32-character Slurm id columns
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9_-]{1,20}")


def check_cluster_name(name: str) -> str:
    """check_cluster_name returns a valid cluster name (1-20 of letters, digits, '_', '-') or raises ValueError."""
    if not isinstance(name, str) or not _CLUSTER_NAME.fullmatch(name):
        raise ValueError(f"not a cluster name: {name!r} (1-20 letters, digits, '_' or '-')")
    return name


def qualify(cluster: str, name: str) -> str:
    """qualify is ``cluster/name``; an empty cluster (the only one) leaves ``name`` as it is."""
    return f"{cluster}{SEP}{name}" if cluster else name


def split_qualified(text: str) -> tuple[str, str]:
    """split_qualified is (cluster, bare name); a name without a cluster gives ('', name)."""
    cluster, sep, bare = text.partition(SEP)
    return (cluster, bare) if sep else ("", text)


def cluster_of(name: str) -> str:
    """cluster_of is the cluster a qualified name is on ('' on a single-cluster site)."""
    return split_qualified(name)[0]


def job_ref(job_id: int | str, cluster: str = "") -> str:
    """job_ref is how metasched names a Slurm job: its id, ``cluster/id`` on a multi-cluster site."""
    return qualify(cluster, str(job_id))


def job_ref_order(ref: str) -> tuple[str, int, str]:
    """job_ref_order sorts job refs by cluster, then numerically by id (an odd id after the numbers)."""
    cluster, bare = split_qualified(ref)
    head = bare.split("_", 1)[0]
    return (cluster, int(head), bare) if head.isdigit() else (cluster, 1 << 62, bare)

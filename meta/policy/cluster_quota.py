"""Per-cluster limits (issue 26): on a site of several clusters a tenant's limit holds on each cluster.

Slurm enforces an association's GrpTRES per cluster: a tenant limited to 40 GPUs may run 40 on
each cluster of the site. metasched's tenant limits come from those associations, so with
``limit_scope: cluster`` (the default) they apply the same way: a task may go only to clusters
where its tenant's limits still have room, and a tenant waits for quota only when no cluster it
may use has room. ``limit_scope: site`` applies each limit to the whole site instead. Pure: no I/O.

Slurm keeps an association per cluster, so a tenant's GrpTRES may differ between clusters: a
tenant with its own limits on a cluster (``TenantState.cluster_limits``, synced from that
cluster's association) is held to them there, and to its site-wide limits on the others.

A limit at or above a cluster's capacity for its key cannot be what stops a task there (the
cluster runs out first), as ``quota.py`` says for one cluster; such a cluster counts as having room.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from meta.policy.gpu_keys import count, gpu_capacity, keys_of

Counts = dict[str, int]  # key (GPU type or "*") -> GPUs


class ClusterQuota:
    """ClusterQuota is each tenant's GPUs in use per cluster and key, against each cluster's capacity."""

    def __init__(self, capacity: Mapping[str, Counts],
                 own_limits: Mapping[str, Mapping[str, Counts]] | None = None) -> None:
        self.capacity = {cluster: dict(keys) for cluster, keys in capacity.items()}
        self.clusters = frozenset(self.capacity)
        self.used: dict[str, dict[str, Counts]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
        # tenant -> cluster -> limits of that cluster's own association (the site-wide limits elsewhere)
        self.own_limits = {t: dict(by_cluster) for t, by_cluster in (own_limits or {}).items() if by_cluster}

    def limited(self, tenant: str, limits: Counts) -> bool:
        """limited tells whether the tenant has a limit anywhere: site-wide or on some cluster of its own."""
        return bool(limits) or any(self.own_limits.get(tenant, {}).values())

    def limits_on(self, limits: Counts, tenant: str, cluster: str) -> Counts:
        """limits_on are the tenant's limits on ``cluster``: that cluster's own association's, else ``limits``."""
        return self.own_limits.get(tenant, {}).get(cluster, limits)

    def charge(self, tenant: str, cluster: str, gpu_type: str | None, gpus: int) -> None:
        """charge counts GPUs of the tenant on the cluster (running, placed or about to be placed)."""
        count(self.used[tenant][cluster], gpu_type, gpus)

    def broken_on(self, limits: Counts, tenant: str, cluster: str, gpu_type: str | None,
                  gpus: int) -> tuple[str, int, int] | None:
        """broken_on is (key, used, limit) of a reachable limit ``gpus`` more would break on ``cluster``."""
        limits = self.limits_on(limits, tenant, cluster)
        used = self.used[tenant][cluster] if tenant in self.used else {}
        capacity = self.capacity.get(cluster, {})
        for key in keys_of(gpu_type):
            cap = limits.get(key)
            if cap is not None and used.get(key, 0) + gpus > cap and cap < capacity.get(key, 0):
                return key, used.get(key, 0), cap
        return None

    def with_room(self, limits: Counts, tenant: str, gpu_type: str | None, gpus: int,
                  clusters: Iterable[str]) -> frozenset[str]:
        """with_room are the clusters among ``clusters`` where the tenant's limits have room for ``gpus`` more."""
        return frozenset(c for c in clusters if self.broken_on(limits, tenant, c, gpu_type, gpus) is None)

    def broken_everywhere(self, limits: Counts, tenant: str, gpu_type: str | None, gpus: int,
                          clusters: Iterable[str]) -> tuple[str, int, int] | None:
        """broken_everywhere is the limit broken on the cluster with the most room, or None if any has room."""
        broken = [self.broken_on(limits, tenant, c, gpu_type, gpus) for c in sorted(clusters)]
        if not broken or any(b is None for b in broken):
            return None
        return min(broken, key=lambda b: (b[1] - b[2], b[0]))  # type: ignore[index]

    def reachable(self, key: str, limit: int) -> bool:
        """reachable tells whether a limit is below some cluster's capacity for its key."""
        return any(limit < keys.get(key, 0) for keys in self.capacity.values())


def cluster_quota(cluster_of_node: list[str], gpu_type_of_node: list[str | None], gpus_of_node: list[int],
                  held: Iterable[tuple[list[tuple], str, str | None, int]],
                  own_limits: Mapping[str, Mapping[str, Counts]] | None = None) -> ClusterQuota:
    """cluster_quota builds the per-cluster ledger from the nodes and what live reservations hold.

    ``held`` are the capacity ledger's entries: (shares [(node index, ...)], tenant, GPU type, GPUs).
    A reservation's cluster is its first share's node's (a gang never spans clusters).
    ``own_limits`` are the tenants' per-cluster limits (tenant -> cluster -> key -> GPUs).
    """
    nodes: dict[str, list[tuple[str | None, int]]] = defaultdict(list)
    for cluster, gpu_type, n in zip(cluster_of_node, gpu_type_of_node, gpus_of_node, strict=True):
        nodes[cluster].append((gpu_type, n))
    capacity = {cluster: gpu_capacity(*zip(*pairs, strict=True)) for cluster, pairs in nodes.items()}
    ledger = ClusterQuota(capacity, own_limits)
    for shares, tenant, gpu_type, gpus in held:
        if shares and gpus:
            ledger.charge(tenant, cluster_of_node[shares[0][0]], gpu_type, gpus)
    return ledger

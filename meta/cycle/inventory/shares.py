"""Cycle step 3, shares: Slurm's account Fairshare -> tenant weight, GrpTRES GPUs -> tenant limits.

As docs/identity.md §6 describes; right after step 2 (inventory), at the topology cadence: one ``sacctmgr show assoc`` read, the
account rows of the local cluster applied to the tenants table. On a site of several clusters sharing
one slurmdbd, each site cluster's own rows give the tenant's limits on that cluster (issue 26:
Slurm's GrpTRES is per cluster, and so is metasched's ``limit_scope: cluster``). Accounting being down skips the
sync for that period (the stored settings stay); it never fails the period.
"""

from __future__ import annotations

import logging

from meta.cycle.inventory.cadence import Cadence
from meta.store.db import Database
from meta.store.tenant_shares import SlurmShares, apply_slurm_shares
from slurm_bridge.client import SlurmClient
from slurm_bridge.clusters import site_clusters
from slurm_bridge.errors import SlurmError
from slurm_bridge.parse.sacctmgr import AccountShares

log = logging.getLogger("metasched.shares")

ROOT_ACCOUNT = "root"  # the association tree's root: not a tenant


class SharesSync:
    """SharesSync copies Slurm's account Fairshare and GPU GrpTRES into the tenants table."""

    def __init__(self, db: Database, client: SlurmClient, refresh_s: float = 300.0) -> None:
        self.db = db
        self.client = client
        self.cadence = Cadence(refresh_s)
        self._cluster: str | None = None

    def sync_if_due(self, now: float) -> list[str] | None:
        """sync_if_due syncs on the first call and then every ``refresh_s`` (monotonic seconds)."""
        return self.sync() if self.cadence.due(now) else None

    def sync(self) -> list[str] | None:
        """sync reads the accounts and applies them; returns the tenants changed (None: accounting unreadable)."""
        try:
            accounts = self.client.account_shares()
            cluster = self._cluster_name()
        except SlurmError as exc:
            log.warning("cannot read Slurm's account shares (tenant weights and limits unchanged): %s", exc)
            return None
        per_cluster = limits_by_cluster(accounts, site_clusters(self.client))  # read now: clusters may join
        shares = [to_shares(a, per_cluster.get(a.account, {})) for a in accounts
                  if a.account != ROOT_ACCOUNT and (not cluster or a.cluster == cluster)]  # fmt: skip
        with self.db.session() as session:
            changed = apply_slurm_shares(session, shares)
        if changed:
            log.info("tenant weights and limits synced from Slurm: %s", ", ".join(changed))
        return changed

    def _cluster_name(self) -> str | None:
        """_cluster_name is the local ClusterName (read once): sacctmgr lists every cluster slurmdbd serves."""
        if self._cluster is None:
            self._cluster = self.client.slurm_config().cluster_name
        return self._cluster


def limits_by_cluster(accounts: list[AccountShares], clusters: tuple[str, ...]) -> dict[str, dict[str, dict[str, int]]]:
    """limits_by_cluster is each account's GPU limits on each of the site's clusters (account -> cluster -> limits).

    Empty for a site of one cluster, and for an account whose limits are the same on every site
    cluster it has an association on: the site-wide limits already say it.
    """
    if len(clusters) < 2:
        return {}
    found: dict[str, dict[str, dict[str, int]]] = {}
    for a in accounts:
        if a.account != ROOT_ACCOUNT and a.cluster in clusters:
            found.setdefault(a.account, {})[a.cluster] = dict(a.gpu_limits)
    return {account: by_cluster for account, by_cluster in found.items()
            if len({tuple(sorted(limits.items())) for limits in by_cluster.values()}) > 1}  # fmt: skip


def to_shares(account: AccountShares, cluster_limits: dict[str, dict[str, int]] | None = None) -> SlurmShares:
    """to_shares turns an account's association (and its per-cluster limits) into the settings metasched stores."""
    weight = float(account.fairshare) if account.fairshare else None  # parent or 0: no weight of its own
    return SlurmShares(
        account=account.account, weight=weight, limits=dict(account.gpu_limits),
        max_pending=account.grp_submit_jobs, max_pending_per_user=account.max_submit_jobs,
        user_max_pending=dict(account.user_max_submit_jobs), cluster_limits=dict(cluster_limits or {}),
    )  # fmt: skip

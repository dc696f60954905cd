"""``metasched cluster drain|resume|list`` as the API answers them: admins only (issue 26).

A drain takes a Slurm cluster out of metasched's placements (no new work goes there; work running
there finishes); the store keeps it (``meta/store/cluster_drains.py``) and the daemon applies it at
its next period. Only admins (Slurm AdminLevel Operator or Administrator, root, SlurmUser) may
drain, resume or list: a refusal is a 403 on the refusal audit, checked before the name or the
reason is read. A name no node of the stored inventory carries is drained all the same (a cluster
about to be added, or a typo): the answer's ``known`` says so, and is None before any inventory.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from meta.model.clusters import cluster_of
from meta.model.errors import Forbidden
from meta.store import cluster_drains
from meta.store.db import Database
from meta.store.inventory import load_nodes
from tenants.identity import Principal

REFUSED = "only an admin (Slurm AdminLevel Operator or Administrator, or root) may drain, resume or list drained clusters"


def _require_admin(principal: Principal) -> None:
    """_require_admin refuses (Forbidden) anyone but an admin."""
    if not principal.is_admin:
        raise Forbidden(REFUSED)


def _known(session: Session, cluster: str) -> bool | None:
    """_known tells whether a node of the stored inventory is on ``cluster`` (None: no inventory stored yet)."""
    nodes = load_nodes(session)
    return None if nodes is None else any(cluster_of(node.name) == cluster for node in nodes)


def drain(db: Database, principal: Principal, cluster: str, reason: str | None = None) -> dict[str, Any]:
    """drain drains ``cluster`` (idempotent, audited ``cluster.drain``): the drain, whether it is new, whether it is known."""
    _require_admin(principal)
    with db.session() as session:
        found, new = cluster_drains.drain(session, cluster, reason, actor=principal.name, uid=principal.uid)
        known = _known(session, found.cluster)
    return {**found.to_dict(), "drained": True, "new": new, "known": known}


def resume(db: Database, principal: Principal, cluster: str) -> dict[str, Any]:
    """resume ends the drain of ``cluster`` (idempotent, audited ``cluster.resume``): the drain it ended, if any."""
    _require_admin(principal)
    with db.session() as session:
        ended = cluster_drains.resume(session, cluster, actor=principal.name, uid=principal.uid)
    name = cluster_drains.check_cluster(cluster)
    return {"cluster": name, "drained": False, "was_drained": ended is not None,
            "ended": None if ended is None else ended.to_dict()}  # fmt: skip


def listing(db: Database, principal: Principal) -> list[dict[str, Any]]:
    """listing is the drained clusters by name, each with its reason, who drained it and since when."""
    _require_admin(principal)
    with db.session() as session:
        return [found.to_dict() for found in cluster_drains.drains(session)]

"""Drained clusters: Slurm clusters an admin took out of metasched's placements (``metasched cluster drain``, issue 26).

A drain is one row of ``cluster_drains`` (migration 0018): the cluster's name, the admin's reason,
who drained it and when. The daemon's step 7 reads ``drained_clusters`` and drains those clusters'
nodes for the policy only, as it does a dark cluster's: no new placement goes there, and work
already running there is neither evicted nor stopped — it finishes. ``resume`` deletes the row.

Both are idempotent. Draining a drained cluster keeps the first drain's ``drained_by`` and
``drained_at`` (the cluster has been out since then) and takes the new reason when one is given
(an admin's latest words; without one the stored reason stays). Resuming a cluster that is not
drained changes nothing. Every call is on the audit trail (``cluster.drain``, ``cluster.resume``),
the repeated ones too. Names and reasons are checked before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from meta.model.clusters import check_cluster_name
from meta.model.durations import utcnow
from meta.model.errors import InvalidRequest
from meta.model.limits import clip
from meta.store import audit
from meta.store.models import ClusterDrain
from meta.store.upsert import insert_new

MAX_REASON_CHARS = 200
MAX_ACTOR_CHARS = 256  # the drained_by column
DRAIN_ACTION = "cluster.drain"
RESUME_ACTION = "cluster.resume"


@dataclass(frozen=True)
class Drain:
    """Drain is one drained cluster: its name, the admin's reason, who drained it and since when."""

    cluster: str
    reason: str
    drained_by: str
    drained_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """to_dict is the drain as the API answers it (the time in ISO 8601)."""
        return {"cluster": self.cluster, "reason": self.reason, "drained_by": self.drained_by,
                "drained_at": self.drained_at.isoformat()}  # fmt: skip


def check_cluster(name: str) -> str:
    """check_cluster is ``name`` if it is a cluster name (meta.model.clusters), else InvalidRequest."""
    try:
        return check_cluster_name(name)
    except ValueError as exc:
        raise InvalidRequest(clip(str(exc))) from None


def check_reason(reason: str | None) -> str:
    """check_reason is ``reason`` stripped ("" for none), refused unless at most MAX_REASON_CHARS printable characters."""
    text = (reason or "").strip()
    if len(text) > MAX_REASON_CHARS or not text.isprintable():
        raise InvalidRequest(clip(f"a drain's reason must be at most {MAX_REASON_CHARS} printable characters on one "
                                  f"line, not {len(text)} characters: {text!r}"))
    return text


def _drain_of(row: ClusterDrain) -> Drain:
    return Drain(row.cluster, row.reason, row.drained_by, row.drained_at)


def drain(session: Session, cluster: str, reason: str | None = None, *, actor: str,
          uid: int | None = None) -> tuple[Drain, bool]:
    """drain drains ``cluster`` (idempotent, audited) and answers the stored drain and whether it is new."""
    name, text = check_cluster(cluster), check_reason(reason)
    # race-free on both backends: of two admins draining at once, the first row written is the drain
    new = insert_new(session, ClusterDrain, cluster=name, reason=text, drained_by=actor[:MAX_ACTOR_CHARS],
                     drained_at=utcnow())
    row = session.scalars(select(ClusterDrain).where(ClusterDrain.cluster == name)).one()
    if not new and text and text != row.reason:
        row.reason = text  # the latest reason; who drained it and since when stay the first drain's
    audit.record(session, actor, DRAIN_ACTION, f"cluster:{name}", reason=text, already=not new, uid=uid)
    return _drain_of(row), new


def resume(session: Session, cluster: str, *, actor: str, uid: int | None = None) -> Drain | None:
    """resume ends the drain of ``cluster`` (idempotent, audited) and answers the drain it ended (None: none)."""
    name = check_cluster(cluster)
    row = session.get(ClusterDrain, name)
    ended = _drain_of(row) if row is not None else None
    # a Core delete: a racing resume that deleted the row first is no error
    session.execute(delete(ClusterDrain).where(ClusterDrain.cluster == name))
    detail: dict[str, Any] = {"was_drained": ended is not None}
    if ended is not None:
        detail |= {"drained_by": ended.drained_by, "drained_at": ended.drained_at.isoformat(), "reason": ended.reason}
    audit.record(session, actor, RESUME_ACTION, f"cluster:{name}", uid=uid, **detail)
    return ended


def drains(session: Session) -> list[Drain]:
    """drains lists the drained clusters by name."""
    return [_drain_of(row) for row in session.scalars(select(ClusterDrain).order_by(ClusterDrain.cluster))]


def drained_clusters(session: Session) -> frozenset[str]:
    """drained_clusters is the names of the drained clusters (the daemon's step 7 reads it each period)."""
    return frozenset(session.scalars(select(ClusterDrain.cluster)))

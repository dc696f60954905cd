"""``audit prune``: an admin removes audit lines older than an age or a date — explicitly, and on the record.

The audit is append-only (database triggers); this is its one deliberate exception (migration
0015). Only an admin may prune, only with ``confirm`` (the CLI's ``--yes``), and only lines at
least ``MIN_AGE_S`` old, so a prune never hides what just happened. The prune itself leaves a
line: who pruned, up to when, how many lines.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from meta.model.durations import parse_duration_s, parse_instant, utcnow
from meta.model.errors import Forbidden, InvalidRequest
from meta.store import audit
from meta.store.db import Database
from tenants.identity import Principal

MIN_AGE_S = 86_400.0  # a day: the last day's lines always stay


def cutoff(before: str, now: datetime) -> datetime:
    """cutoff reads ``before``: an age (``90d``, ``12h``) back from ``now``, or an ISO time; at least a day back."""
    text = (before or "").strip()
    if not text:
        raise InvalidRequest("--before: give an age such as 90d or an ISO time such as 2026-09-01")
    try:
        moment = now - timedelta(seconds=parse_duration_s(text))
    except (ValueError, OverflowError):
        try:
            moment = parse_instant(text)
        except ValueError:
            raise InvalidRequest(f"--before: {text!r} is neither an age (90d, 12h) nor an ISO time") from None
    if moment > now - timedelta(seconds=MIN_AGE_S):
        raise InvalidRequest("--before: only lines at least a day old may be pruned (e.g. --before 90d)")
    return moment


def prune(db: Database, principal: Principal, before: str, *, confirm: bool) -> dict[str, Any]:
    """prune deletes the audit lines older than ``before`` (admins, with ``confirm``) and answers how many."""
    if not principal.is_admin:
        raise Forbidden(
            "only an admin (Slurm AdminLevel Operator or Administrator, or root) may prune the audit"
        )
    moment = cutoff(before, utcnow())
    if confirm is not True:
        raise InvalidRequest("pruning deletes audit lines for good: confirm it (metasched audit prune --yes)")
    with db.session() as session:
        deleted = audit.prune(session, principal.name, moment, uid=principal.uid, asked=before[:64])
    return {"before": moment.isoformat(), "deleted": deleted, "by": principal.name}

"""The store's site id: which metasched site this store is, named in every Slurm job tag (issue 26).

Two metasched instances may share one Slurm cluster (production and staging, each with its own
store). The reconciler follows, counts and cancels only jobs whose tag names its own site, so
each store draws a short random id once (``meta.model.ids.new_site_id``) and keeps it for
ever: ``metasched serve`` and ``metasched db upgrade`` call ``ensure_site_id`` (replicas racing
to draw it agree on the first one written); ``metasched db current`` shows it. It is not a
secret (Slurm comments are public) and proves nothing: whose job it is still rests on its Unix
user. A store copied from another (staging restored from production's dump) has the same id
until ``renew_site_id`` draws a new one.
"""

from __future__ import annotations

from sqlalchemy import func, inspect, select
from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.model.ids import check_site_id, new_site_id
from meta.model.states import LIVE_ATTEMPT_STATES
from meta.store.clock import store_clock
from meta.store.db import Database
from meta.store.models import Attempt, LeaderLease, SiteIdentity
from meta.store.upsert import insert_ignore

_ROW = 1  # the one row's key
_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]


class SiteInUse(Exception):
    """SiteInUse: the site id cannot change while a daemon leads the store or attempts launched under it are live."""


def read_site_id(session: Session) -> str | None:
    """read_site_id is the store's site id, None before one was drawn."""
    return session.scalar(select(SiteIdentity.site_id).where(SiteIdentity.id == _ROW))


def ensure_site_id(db: Database) -> str:
    """ensure_site_id is the store's site id, drawn and stored now if it has none yet (race-free)."""
    with db.session() as session:
        found = read_site_id(session)
        if found is not None:
            return check_site_id(found)
        insert_ignore(session, SiteIdentity, id=_ROW, site_id=new_site_id(), created_at=utcnow())
        stored = read_site_id(session)  # ours, or the one another replica wrote first
    assert stored is not None
    return check_site_id(stored)


def stored_site_id(db: Database) -> str | None:
    """stored_site_id reads the site id without drawing one (None: none yet, or a schema older than sites)."""
    if not inspect(db.engine).has_table(SiteIdentity.__tablename__):
        return None
    with db.session() as session:
        return read_site_id(session)


def renew_site_id(db: Database) -> str:
    """renew_site_id draws a new site id for a copied store; refused (SiteInUse) while it is in use.

    A live attempt's job carries the old id: under a new one it would be another site's job,
    never followed again, and its attempt would be lost and launched twice. A running daemon
    read the id when it started and would go on tagging with the old one.
    """
    with db.session() as session:
        # the store's clock, as the lease's own decisions (meta/store/clock.py): this host's may be skewed
        leader = session.scalar(
            select(LeaderLease).where(LeaderLease.expires_at > store_clock(session)).limit(1)
        )
        if leader is not None:
            raise SiteInUse(f"metasched serve {leader.holder!r} leads this store: stop every replica first")
        live = session.scalar(select(func.count()).select_from(Attempt).where(Attempt.state.in_(_LIVE))) or 0
        if live:
            raise SiteInUse(f"{live} attempt(s) are live under the current site id: wait until they end")
        site = new_site_id()
        row = session.get(SiteIdentity, _ROW)
        if row is None:
            session.add(SiteIdentity(id=_ROW, site_id=site, created_at=utcnow()))
        else:
            row.site_id, row.created_at = site, utcnow()
    return site

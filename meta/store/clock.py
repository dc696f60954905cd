"""The store's clock: the one "now" that replicas on different hosts agree on (issue 25, clock skew).

A decision that compares a time one replica wrote with "now" on another (the leader lease's
expiry) reads both from one clock. On PostgreSQL that is the server's ``clock_timestamp()``,
evaluated inside the statement that reads or writes the row, so it costs no round trip of its
own; on SQLite (one host, one daemon) it is this host's clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, DateTime, func, literal, type_coerce
from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.store.types import UTCDateTime


def store_clock(session: Session, plus_s: float = 0.0) -> ColumnElement[datetime]:
    """store_clock is the store's current time plus ``plus_s`` seconds, as a SQL expression (selected: an aware UTC datetime).

    PostgreSQL: ``clock_timestamp()``, the moment the server evaluates it (not the transaction's
    start); put it in the statement whose rows it judges. SQLite: this host's ``utcnow()``, bound.
    """
    if session.get_bind().dialect.name == "postgresql":
        clock = func.clock_timestamp(type_=DateTime(timezone=True))
        if plus_s:
            clock = clock + timedelta(seconds=plus_s)
        return type_coerce(clock, UTCDateTime)
    return literal(utcnow() + timedelta(seconds=plus_s), UTCDateTime)

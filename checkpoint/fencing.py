"""Fenced writes from inside a running job: only the task's current attempt, with its token."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from meta.model.errors import NotFound, StaleFencingToken
from meta.store.lifecycle import live_attempt
from meta.store.models import Attempt


def current_attempt(session: Session, attempt_id: str, token: int, now: datetime, *, need_lease: bool) -> Attempt:
    """current_attempt returns the attempt if it is its task's live attempt with this token (and lease)."""
    attempt = session.get(Attempt, attempt_id)
    if attempt is None:
        raise NotFound(f"attempt {attempt_id} not found")
    if attempt.fencing_token != token:
        raise StaleFencingToken(f"attempt {attempt_id}: token {token} is not its token {attempt.fencing_token}")
    live = live_attempt(session, attempt.task_id)
    if live is None or live.id != attempt.id:
        raise StaleFencingToken(f"attempt {attempt_id} is no longer its task's current attempt ({attempt.state})")
    if need_lease and (attempt.lease_expires_at is None or attempt.lease_expires_at <= now):
        raise StaleFencingToken(f"attempt {attempt_id}: its lease expired at {attempt.lease_expires_at}")
    return attempt

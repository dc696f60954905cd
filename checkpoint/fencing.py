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
    live = live_attempt(session, attempt.task_id)
    check_current(attempt, token, live.id if live is not None else None, now, need_lease=need_lease)
    return attempt


def check_current(attempt: Attempt, token: int, live_id: str | None, now: datetime, *, need_lease: bool) -> None:
    """check_current raises unless ``attempt`` carries ``token``, is its task's live attempt (``live_id``) and, if asked, holds its lease."""
    if attempt.fencing_token != token:
        raise StaleFencingToken(f"attempt {attempt.id}: token {token} is not its token {attempt.fencing_token}")
    if live_id != attempt.id:
        raise StaleFencingToken(f"attempt {attempt.id} is no longer its task's current attempt ({attempt.state})")
    if need_lease and (attempt.lease_expires_at is None or attempt.lease_expires_at <= now):
        raise StaleFencingToken(f"attempt {attempt.id}: its lease expired at {attempt.lease_expires_at}")

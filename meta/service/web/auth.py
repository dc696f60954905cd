"""Passwordless login for the web view: MUNGE-proved callers get a short-lived, single-use login link.

``metasched web`` (MUNGE-authenticated, like every CLI command) asks for a link; opening it in a
browser redeems it once and sets a session cookie (HttpOnly, SameSite=Strict, Secure over TLS,
signed, expiring) that names the uid MUNGE proved and a random session id, live only while the
server holds it (``meta.service.web.sessions``): logging out deletes it. The server key never leaves the daemon: it signs, it is never
logged or audited. A link is single-use: redeemed nonces are remembered in memory until they
expire and, for other replicas sharing the store, each login is audited under its link id
(``web.login``, subject ``link:<nonce>``) and a link whose id is in the audit is refused.
"""

from __future__ import annotations

import os
import secrets
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from meta.service.web.sessions import LiveSessions
from meta.service.web.tokens import LOGIN, SESSION, BadToken, Claims, sign, verify
from meta.store import audit
from meta.store.db import Database
from meta.store.models import AuditEvent
from tenants.auth import Identity

LOGIN_TTL_S = 600.0  # a link is for opening now, as Jupyter's token links are
SESSION_TTL_S = 8 * 3600.0  # a working day; run `metasched web` again after it
COOKIE = "metasched_session"
KEY_BYTES = 32
SESSION_ID_BYTES = 32  # the live session's id: unguessable, so the table is the only way in


@dataclass
class WebSettings:
    """WebSettings are the web view's server key, its public base URL (set once TCP listens), the jobs' log folder."""

    key: bytes
    base_url: str | None = None
    log_dir: str | None = None  # where jobs that run as the daemon's user write (``serve --log-dir``)
    login_ttl_s: float = LOGIN_TTL_S
    session_ttl_s: float = SESSION_TTL_S

    @classmethod
    def ephemeral(cls) -> WebSettings:
        """ephemeral is settings with a fresh random key (links and sessions end with the process)."""
        return cls(key=secrets.token_bytes(KEY_BYTES))


def load_key(path: Path) -> bytes:
    """load_key reads the server key file, creating it (0600, random) when missing; a loose or foreign file is refused."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(KEY_BYTES) + "\n")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd) as handle:
        info = os.fstat(handle.fileno())
        if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o077:
            raise ValueError(f"{path}: the web key must be owned by the daemon's user and mode 0600")
        text = handle.read().strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{path}: not a hex key") from None
    if len(key) < 16:
        raise ValueError(f"{path}: key shorter than 16 bytes")
    return key


@dataclass
class WebAuth:
    """WebAuth issues login links and session cookies and checks them (thread-safe)."""

    settings: WebSettings
    clock: Callable[[], float] = time.time
    _used: dict[str, float] = field(default_factory=dict)  # redeemed link nonces -> when they expire anyway
    sessions: LiveSessions = field(default_factory=LiveSessions)  # the live session ids (logout deletes)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def issue_link(self, identity: Identity) -> tuple[str, float]:
        """issue_link is a login token for ``identity`` and when it expires (Unix time)."""
        expires = self.clock() + self.settings.login_ttl_s
        claims = Claims(LOGIN, identity.uid, identity.gid, identity.user, expires, secrets.token_urlsafe(12))
        return sign(self.settings.key, claims), expires

    def redeem(self, db: Database, token: str) -> Claims:
        """redeem accepts a login token once: checked, not seen before here or in the audit, then audited ``web.login``."""
        now = self.clock()
        claims = verify(self.settings.key, token, LOGIN, now)
        with self._lock:
            self._used = {nonce: until for nonce, until in self._used.items() if until > now}
            if claims.nonce in self._used:
                raise BadToken("this login link was used already", "reused")
            self._used[claims.nonce] = claims.expires
        subject = f"link:{claims.nonce}"  # the link's id, never the token: it alone proves nothing
        with db.session() as session:
            if session.scalar(select(AuditEvent.id).where(AuditEvent.action == "web.login", AuditEvent.subject == subject)):
                raise BadToken("this login link was used already", "reused")
            audit.record(session, claims.user, "web.login", subject, uid=claims.uid)
        return claims

    def session_token(self, claims: Claims) -> str:
        """session_token is the cookie value for the user a redeemed link named (its session id made live)."""
        now = self.clock()
        expires = now + self.settings.session_ttl_s
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        self.sessions.add(session_id, claims.uid, expires, now)
        return sign(self.settings.key, Claims(SESSION, claims.uid, claims.gid, claims.user, expires, session_id))

    def identity_of(self, cookie: str | None) -> Identity:
        """identity_of is the Identity a session cookie names (BadToken when absent, altered or expired)."""
        if not cookie:
            raise BadToken("not signed in", "missing")
        now = self.clock()
        claims = verify(self.settings.key, cookie, SESSION, now)
        if not self.sessions.alive(claims.nonce, claims.uid, now):
            raise BadToken("signed out (or the server restarted)", "revoked")
        return Identity(uid=claims.uid, gid=claims.gid, user=claims.user)

    def end_session(self, cookie: str | None) -> Claims | None:
        """end_session deletes the live session a cookie names (logout); its claims, or None when none was live."""
        try:
            claims = verify(self.settings.key, cookie or "", SESSION, self.clock())
        except BadToken:
            return None
        return claims if self.sessions.revoke(claims.nonce) else None

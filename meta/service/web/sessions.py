"""The web view's live sessions: a session cookie counts only while its id is here (issue 22, S14).

A session cookie is signed (``meta.service.web.tokens``) and names a random session id; this
server-side table says which ids are live. Logging out deletes the id, so a copied cookie stops
working at once instead of at its expiry. The table lives in the API process: a restart signs
everyone out (run ``metasched web`` again). It is bounded per user and in all, oldest dropped
first, so logins cannot grow it without end.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

MAX_PER_USER = 32  # browsers and devices one person signs in from at once
MAX_SESSIONS = 10_000


@dataclass
class LiveSessions:
    """LiveSessions maps live session ids to (uid, expiry); thread-safe, pure (the caller passes the clock)."""

    max_per_user: int = MAX_PER_USER
    max_sessions: int = MAX_SESSIONS
    _live: dict[str, tuple[int, float]] = field(default_factory=dict)  # insertion order: oldest first
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, session_id: str, uid: int, expires: float, now: float) -> None:
        """add makes a session live until ``expires`` (dropping expired ones and, past a bound, the oldest)."""
        with self._lock:
            self._live = {sid: v for sid, v in self._live.items() if v[1] > now}
            mine = [sid for sid, (owner, _) in self._live.items() if owner == uid]
            for sid in mine[: max(0, len(mine) - self.max_per_user + 1)]:
                del self._live[sid]
            for sid in list(self._live)[: max(0, len(self._live) - self.max_sessions + 1)]:
                del self._live[sid]
            self._live[session_id] = (uid, expires)

    def alive(self, session_id: str, uid: int, now: float) -> bool:
        """alive tells whether the session is live, unexpired and the given uid's."""
        with self._lock:
            entry = self._live.get(session_id)
        return entry is not None and entry[0] == uid and entry[1] > now

    def revoke(self, session_id: str) -> bool:
        """revoke ends a session (logout); False when it was not live."""
        with self._lock:
            return self._live.pop(session_id, None) is not None

    def __len__(self) -> int:
        """len is how many sessions are held (expired ones until the next add)."""
        with self._lock:
            return len(self._live)

"""RefusalAudit: every refusal and authentication failure reaches the audit, at a bounded rate.

Refusals are grouped by (actor, action, kind) in windows of ``window_s`` seconds: the first
``full_per_window`` of a group in a window are written in full; the rest are only counted, and
when the window closes one ``audit.refusals`` summary row says how many there were (issue 22,
S9, S12). So a caller refused 300 times a second writes a handful of rows a minute, and the
admin's view still shows who was refused, what for and how often. The groups in memory are
bounded too (``max_groups``): beyond it, new callers share one ``(others)`` group.

Kinds are words from fixed sets (an error's type, an authentication code), never free text; a
row's detail holds ids, names and one-line reasons, never a credential or a secret.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from meta.model.limits import clip
from meta.store import audit
from meta.store.db import Database

log = logging.getLogger("metasched.api")

DEFAULT_WINDOW_S = 60.0
DEFAULT_FULL_PER_WINDOW = 5
DEFAULT_MAX_GROUPS = 4_096
SUMMARY_ACTION = "audit.refusals"
AUTH_ACTION = "auth.refused"
OTHERS = "(others)"
# the service's window and share, when an operator changes them (docs/operations.md)
WINDOW_ENV, FULL_ENV = "METASCHED_REFUSAL_WINDOW_S", "METASCHED_REFUSALS_IN_FULL"
AUDITED = "metasched_audited"  # set on an exception whose refusal is already recorded (not twice)
Key = tuple[str, str, str]


@dataclass
class _Window:
    """_Window is one group's current window: when it opened, rows written in full, refusals only counted."""

    opened: float
    tenant: str | None
    written: int = 0
    counted: int = 0
    tenants: set[str | None] = field(default_factory=set)


@dataclass(frozen=True)
class Refusal:
    """Refusal is one refused call as the audit records it: who, what, on which subject, why."""

    actor: str
    action: str
    subject: str
    kind: str  # from a fixed set: an error type, an authentication code
    tenant: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class RefusalAudit:
    """RefusalAudit writes refusals to the audit: the first few per group and window in full, then a count."""

    def __init__(
        self,
        db: Database,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        full_per_window: int = DEFAULT_FULL_PER_WINDOW,
        max_groups: int = DEFAULT_MAX_GROUPS,
        clock: Callable[[], float] = time.monotonic,
        autoflush: bool = True,
    ) -> None:
        self.db = db
        self.window_s = window_s
        self.full_per_window = full_per_window
        self.max_groups = max_groups
        self.clock = clock
        self.autoflush = autoflush  # a timer writes the summaries of closed windows (tests call flush)
        self._windows: dict[Key, _Window] = {}
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._swept = float("-inf")
        if autoflush:
            _LIVE.add(self)  # a stopping service still writes the summaries of its open windows

    def refused(self, refusal: Refusal) -> bool:
        """refused records one refusal: in full (True) while its group is under its share, else counted."""
        now = self.clock()
        # a flood sweeps the groups for closed windows once a second, not on every call
        if now - self._swept >= min(1.0, self.window_s):
            self._swept = now
            self.flush(now)
        with self._lock:
            key = self._key(refusal)
            window = self._windows.get(key)
            if window is None:
                window = self._windows[key] = _Window(opened=now, tenant=refusal.tenant)
            window.tenants.add(refusal.tenant)
            full = window.written < self.full_per_window
            if full:
                window.written += 1
            else:
                window.counted += 1
                self._arm_timer()
        if full:
            self._write(refusal.actor, refusal.action, refusal.subject, refusal.tenant,
                        {"kind": refusal.kind, **refusal.detail})  # fmt: skip
        return full

    def auth_failed(self, peer: str, code: str, route: str) -> bool:
        """auth_failed records one refused credential of ``peer`` (a uid or an address, never the credential)."""
        return self.refused(
            Refusal(peer, AUTH_ACTION, clip(route, 256), code, detail={"route": clip(route, 256)})
        )

    def flush(self, now: float | None = None, *, everything: bool = False) -> int:
        """flush closes the windows that are over (every one with ``everything``) and writes their summaries."""
        now = self.clock() if now is None else now
        with self._lock:
            closed = [
                key for key, w in self._windows.items() if everything or now - w.opened >= self.window_s
            ]
            summaries = [(key, self._windows.pop(key)) for key in closed]
        written = 0
        for (actor, action, kind), window in summaries:
            if window.counted:
                tenant = window.tenant if len(window.tenants) == 1 else None
                self._write(actor, SUMMARY_ACTION, action, tenant, {
                    "refused_action": action, "kind": kind, "refused": window.written + window.counted,
                    "written_in_full": window.written, "counted_only": window.counted,
                    "window_s": self.window_s,
                })  # fmt: skip
                written += 1
        return written

    def actors(self, action: str) -> int:
        """actors is how many callers have an open window for ``action`` (e.g. peers refused a credential)."""
        with self._lock:
            return len({actor for (actor, act, _) in self._windows if act == action})

    def close(self) -> None:
        """close writes every open window's summary and stops the timer (the service is stopping)."""
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self.flush(everything=True)

    def _key(self, refusal: Refusal) -> Key:
        """_key is the refusal's group; a caller beyond ``max_groups`` groups shares the ``(others)`` one."""
        key = (refusal.actor, refusal.action, refusal.kind)
        if key in self._windows or len(self._windows) < self.max_groups:
            return key
        return (OTHERS, refusal.action, refusal.kind)

    def _arm_timer(self) -> None:
        """_arm_timer makes sure a timer writes the summary once the oldest counting window closes (lock held)."""
        if not self.autoflush or self._timer is not None:
            return
        oldest = min(w.opened for w in self._windows.values())
        delay = max(0.0, oldest + self.window_s - self.clock()) + 0.05
        self._timer = threading.Timer(delay, self._on_timer)
        self._timer.daemon = True
        self._timer.start()

    def _on_timer(self) -> None:
        """_on_timer writes the closed windows' summaries and re-arms while some group still counts."""
        with self._lock:
            self._timer = None
        self.flush()
        with self._lock:
            if any(w.counted for w in self._windows.values()):
                self._arm_timer()

    def _write(
        self, actor: str, action: str, subject: str, tenant: str | None, detail: dict[str, Any]
    ) -> None:
        """_write appends one audit row in its own transaction; a refusal stands even when its row cannot be written."""
        try:
            with self.db.session() as session:
                audit.record(session, clip(actor, 256), action, clip(subject, 256), tenant=tenant, **detail)
        except Exception as exc:  # noqa: BLE001 - the refusal is answered whatever the store says
            log.warning("cannot audit a refusal (%s by %s): %s", action, actor, exc)


_LIVE: weakref.WeakSet[RefusalAudit] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """_close_all writes every live RefusalAudit's open summaries when the process exits (the daemon stopping)."""
    for refusals in list(_LIVE):
        refusals.close()


def mark_audited(exc: BaseException) -> None:
    """mark_audited notes on ``exc`` that its refusal is recorded, so the API's error handler does not add a row."""
    setattr(exc, AUDITED, True)


def is_audited(exc: BaseException) -> bool:
    """is_audited tells whether ``exc``'s refusal is already recorded."""
    return bool(getattr(exc, AUDITED, False))


def from_env(db: Database, environ: Mapping[str, str] = os.environ) -> RefusalAudit:
    """from_env is the service's RefusalAudit: window and share from the environment, else the defaults."""
    window = _setting(environ, WINDOW_ENV, DEFAULT_WINDOW_S, 0.1, 86_400.0)
    full = _setting(environ, FULL_ENV, DEFAULT_FULL_PER_WINDOW, 0, 1_000)
    return RefusalAudit(db, window_s=window, full_per_window=int(full))


def _setting(environ: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    """_setting is one number from the environment within [low, high]; anything else keeps the default (logged)."""
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # NaN fails too
        log.warning("%s=%r is not a number from %s to %s: using %s", name, text, low, high, default)
        return default
    return value

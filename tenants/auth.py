"""Authentication: who is calling the API service, proven by a credential (docs/identity.md §3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Identity:
    """Identity is an authenticated caller: the uid and gid munged vouched for, and the passwd name."""

    uid: int
    gid: int
    user: str


class Unauthenticated(Exception):
    """Unauthenticated says why a request carries no valid credential (one line) and a short code for metrics."""

    def __init__(self, message: str, code: str = "invalid") -> None:
        super().__init__(message)
        self.code = code  # one of a few fixed words (missing, malformed, expired, ...): a bounded metric label


class Authenticator(Protocol):
    """Authenticator turns a request's Authorization header into an Identity, or raises Unauthenticated."""

    def authenticate(self, authorization_header: str | None, method: str, target: str, body: bytes) -> Identity:
        """authenticate checks the header's credential against this exact request."""
        ...

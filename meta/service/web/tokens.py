"""Signed, expiring tokens for the web view: ``<claims>.<HMAC-SHA256>``, both base64url.

The MAC covers a version tag, the token's purpose and the encoded claims, so a login link is
never accepted as a session cookie (or the reverse), and any change to the claims is refused.
Pure: the caller passes the key and the clock.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import asdict, dataclass

LOGIN = "login"
SESSION = "session"
_VERSION = b"metasched-web-v1"
MAX_TOKEN_CHARS = 1_024


class BadToken(Exception):
    """BadToken says why a token is refused, with a short code (malformed, forged, expired, reused)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Claims:
    """Claims are what a token vouches for: purpose, the MUNGE-proved uid, gid and user, expiry, a nonce."""

    purpose: str
    uid: int
    gid: int
    user: str
    expires: float  # Unix time
    nonce: str  # random per token: what makes a login link single-use


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, purpose: str, body: str) -> str:
    message = _VERSION + b"\n" + purpose.encode() + b"\n" + body.encode("ascii")
    return _b64(hmac.new(key, message, hashlib.sha256).digest())


def sign(key: bytes, claims: Claims) -> str:
    """sign is the token carrying ``claims``, MAC'd with ``key`` for its purpose."""
    body = _b64(json.dumps(asdict(claims), separators=(",", ":"), sort_keys=True).encode())
    return f"{body}.{_mac(key, claims.purpose, body)}"


def verify(key: bytes, token: str, purpose: str, now: float) -> Claims:
    """verify is the token's claims when its MAC matches ``purpose`` and it has not expired (else BadToken)."""
    if not token or len(token) > MAX_TOKEN_CHARS or token.count(".") != 1 or not token.isascii():
        raise BadToken("malformed token", "malformed")
    body, mac = token.split(".")
    if not hmac.compare_digest(mac, _mac(key, purpose, body)):
        raise BadToken("invalid signature (forged, altered, or signed by another server key)", "forged")
    try:
        claims = Claims(**json.loads(_unb64(body)))
    except (ValueError, TypeError, binascii.Error):
        raise BadToken("malformed token", "malformed") from None
    if claims.purpose != purpose:
        raise BadToken("token for another purpose", "forged")
    if claims.expires <= now:
        raise BadToken("expired", "expired")
    return claims

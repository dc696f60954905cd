"""The per-attempt secret a job proves itself with (docs/identity.md §5): random, stored only as its SHA-256.

The actuator makes one for every launch and writes it into the batch script (Slurm shows a
script only to its owner and admins); the store keeps its digest. A job-side call must send it
back: the fencing token orders attempts, it is not a credential.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

SECRET_BYTES = 32  # 256 bits of randomness: 43 URL-safe characters


def digest(secret: str) -> str:
    """digest is the hex SHA-256 of a secret, what the attempt row stores."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def new_secret() -> tuple[str, str]:
    """new_secret is a fresh random secret and its digest."""
    secret = secrets.token_urlsafe(SECRET_BYTES)
    return secret, digest(secret)


def matches(secret: str | None, stored_digest: str | None) -> bool:
    """matches tells, in constant time, whether ``secret`` is the one whose digest the attempt stores."""
    if not secret or not stored_digest:
        return False
    return hmac.compare_digest(digest(secret), stored_digest)

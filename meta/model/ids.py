"""Identities: UUIDs for every entity, plus a short human id for jobs."""

from __future__ import annotations

import secrets
import uuid

# Crockford-style alphabet: no i, l, o, u, so ids read aloud and typed back stay unambiguous
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def new_uuid() -> str:
    """new_uuid returns a random UUID as a string."""
    return str(uuid.uuid4())


def new_short_job_id() -> str:
    """new_short_job_id returns a short human id such as ``j4k9x2m7`` (40 random bits)."""
    return "j" + "".join(secrets.choice(_ALPHABET) for _ in range(8))


def looks_like_uuid(text: str) -> bool:
    """looks_like_uuid tells whether ``text`` parses as a UUID."""
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True

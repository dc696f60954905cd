"""Identities: UUIDs for every entity, a short human id for jobs, and the site id of a store."""

from __future__ import annotations

import os
import re
import secrets
import uuid

# Crockford-style alphabet: no i, l, o, u, so ids read aloud and typed back stay unambiguous
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
# A site id goes into every Slurm job comment metasched writes (``metasched:site=<id>:...``):
# bounded, lowercase ASCII, and without the tag's separators (``:``, ``=``, spaces); fullmatch
# with ASCII classes, as for attempt ids (``$`` would accept a final newline)
SITE_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
SITE_ID_LENGTH = 12  # 60 random bits: two stores never draw the same one


def new_uuid() -> str:
    """new_uuid returns a random UUID as a string."""
    return str(uuid.uuid4())


def new_uuids(count: int) -> list[str]:
    """new_uuids returns ``count`` random (version 4) UUIDs: one urandom read, no UUID objects.

    A job of 100,000 partitions needs as many task ids; ``uuid4()`` one by one costs most of a second.
    """
    raw = os.urandom(16 * count).hex()
    ids = []
    for start in range(0, 32 * count, 32):
        h = raw[start : start + 32]
        variant = "89ab"[int(h[16], 16) & 3]  # RFC 4122: the two top bits of byte 8 are 10
        ids.append(f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}")
    return ids


def new_short_job_id() -> str:
    """new_short_job_id returns a short human id such as ``j4k9x2m7`` (40 random bits)."""
    return "j" + "".join(secrets.choice(_ALPHABET) for _ in range(8))


def new_site_id() -> str:
    """new_site_id returns a random site id such as ``k3x9m2q7r4vd`` (a store draws it once, at its first start)."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(SITE_ID_LENGTH))


def check_site_id(site: str) -> str:
    """check_site_id returns ``site`` if it is a valid site id, else raises ValueError."""
    if not isinstance(site, str) or not SITE_ID.fullmatch(site):
        raise ValueError(f"site id {site!r} must match {SITE_ID.pattern}")
    return site


def looks_like_uuid(text: str) -> bool:
    """looks_like_uuid tells whether ``text`` parses as a UUID."""
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True

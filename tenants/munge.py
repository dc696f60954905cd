"""MungeAuthenticator: the API service's side of MUNGE authentication (docs/identity.md §3).

A request carries ``Authorization: MUNGE <credential>``; the credential's payload binds the
request (``tenants.credential.request_payload``). It is accepted when munged decodes it with
success (munged itself refuses expired, rewound and replayed credentials), its payload is this
request's, and its encode time is within its TTL (and our own ceiling). The caller is the uid and
gid munged vouches for, named from the passwd database.
"""

from __future__ import annotations

import hmac
import pwd
import re
import time
from collections.abc import Callable
from typing import Literal

from tenants import libmunge, munge_command
from tenants.auth import Identity, Unauthenticated
from tenants.credential import (
    CRED_EXPIRED,
    CRED_REWOUND,
    DAEMON_ERRORS,
    SCHEME,
    SUCCESS,
    Decoded,
    request_payload,
    status_code,
    status_reason,
)

Backend = Literal["auto", "libmunge", "command"]
MAX_CREDENTIAL_CHARS = 16_384  # a credential over a few hundred bytes of payload is ~1 KiB
MAX_AGE_S = 300  # munged's default TTL: a client asking for a longer one gains nothing here
CLOCK_SKEW_S = 5  # the encoding host (a login node) may run a little ahead of ours
_CREDENTIAL = re.compile(r"MUNGE:[A-Za-z0-9+/=]+:", re.ASCII)  # fullmatch: the base64 body munge prints


class MungeUnavailable(Unauthenticated):
    """MungeUnavailable says the service's own munged could not be asked (a server fault, not the caller's)."""


class MungeAuthenticator:
    """MungeAuthenticator decodes a request's MUNGE credential into an Identity, or raises Unauthenticated."""

    def __init__(
        self,
        socket: str | None = None,
        backend: Backend = "auto",
        *,
        max_age_s: int = MAX_AGE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.socket = socket
        self.max_age_s = max_age_s
        self._clock = clock
        lib = libmunge.load() if backend in ("auto", "libmunge") else None
        if backend == "libmunge" and lib is None:
            raise OSError(f"{libmunge.LIBRARY} cannot be loaded")
        self.backend: str = "libmunge" if lib is not None else "command"
        self._decode: Callable[[str, str | None], Decoded] = lib.decode if lib is not None else munge_command.decode

    def authenticate(self, authorization_header: str | None, method: str, target: str, body: bytes) -> Identity:
        """authenticate checks the header's credential against this exact request (method, path?query, body)."""
        credential = credential_of(authorization_header)
        decoded = self._decode(credential, self.socket)
        if decoded.status in DAEMON_ERRORS:
            raise MungeUnavailable(status_reason(decoded.status), status_code(decoded.status))
        if decoded.status != SUCCESS:
            raise Unauthenticated(status_reason(decoded.status), status_code(decoded.status))
        # constant time: the payload is not secret, but nothing is gained by telling how much matched
        if not hmac.compare_digest(decoded.payload, request_payload(method, target, body)):
            raise Unauthenticated("credential bound to another request", "wrong_request")
        now = self._clock()
        if decoded.encode_time > now + CLOCK_SKEW_S:
            raise Unauthenticated(status_reason(CRED_REWOUND), "rewound")
        if now - decoded.encode_time > min(decoded.ttl or self.max_age_s, self.max_age_s):
            raise Unauthenticated(status_reason(CRED_EXPIRED), "expired")
        return Identity(uid=decoded.uid, gid=decoded.gid, user=user_name(decoded.uid))


def credential_of(header: str | None) -> str:
    """credential_of takes the credential out of ``MUNGE <credential>``; raises Unauthenticated otherwise."""
    if header is None or not header.strip():
        raise Unauthenticated("no credential: send Authorization: MUNGE <credential>", "missing")
    scheme, _, credential = header.strip().partition(" ")
    credential = credential.strip()
    if scheme.upper() != SCHEME or not credential:
        raise Unauthenticated("malformed credential: expected Authorization: MUNGE <credential>", "malformed")
    # checked here so nothing odd reaches munged (or a command line)
    if len(credential) > MAX_CREDENTIAL_CHARS or not _CREDENTIAL.fullmatch(credential):
        raise Unauthenticated("malformed credential", "malformed")
    return credential


def user_name(uid: int) -> str:
    """user_name names a uid from the passwd database (``uid<N>`` without an entry)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid{uid}"

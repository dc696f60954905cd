"""Credential vocabulary shared by both ends: the request payload a MUNGE credential binds, and a decode's result.

Standard library only: the client imports this before it talks to the API service, and a job's
own Python (any interpreter on the node) may too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

SCHEME = "MUNGE"  # Authorization: MUNGE <credential>
PAYLOAD_VERSION = "metasched-v1"

# munge_err_t (munge.h): the ones a decode can meet
SUCCESS = 0
SOCKET_ERROR = 6
SOCKET_TIMEOUT = 7
BAD_CRED = 8
CRED_INVALID = 14
CRED_EXPIRED = 15
CRED_REWOUND = 16
CRED_REPLAYED = 17
CRED_UNAUTHORIZED = 18
# munged could not be asked at all: the server's problem, not the caller's
DAEMON_ERRORS = frozenset({1, 2, 3, 4, 5, SOCKET_ERROR, SOCKET_TIMEOUT})

_REASONS = {
    BAD_CRED: "malformed credential",
    CRED_INVALID: "invalid credential (forged, or encoded with another MUNGE key)",
    CRED_EXPIRED: "expired credential",
    CRED_REWOUND: "credential encoded in the future (clock rewound)",
    CRED_REPLAYED: "replayed credential (a credential is good for one request)",
    CRED_UNAUTHORIZED: "credential restricted to another user",
}


def request_payload(method: str, target: str, body: bytes) -> bytes:
    """request_payload is what a credential binds: version, method, path?query and the body's SHA-256."""
    digest = hashlib.sha256(body).hexdigest()
    return f"{PAYLOAD_VERSION}\n{method.upper()}\n{target}\n{digest}".encode()


_CODES = {
    BAD_CRED: "malformed",
    CRED_INVALID: "invalid",
    CRED_EXPIRED: "expired",
    CRED_REWOUND: "rewound",
    CRED_REPLAYED: "replayed",
    CRED_UNAUTHORIZED: "unauthorized",
}


def status_code(status: int) -> str:
    """status_code is a munge error code as one short word (the auth-failure metric's reason label)."""
    if status in DAEMON_ERRORS:
        return "munge_unavailable"
    return _CODES.get(status, "invalid")


def status_reason(status: int) -> str:
    """status_reason is a one-line reason for a munge error code, in the service's words."""
    if status in DAEMON_ERRORS:
        return "the local munged cannot be reached"
    return _REASONS.get(status, "invalid credential")


@dataclass(frozen=True)
class Decoded:
    """Decoded is what munged says about a credential: status, uid, gid, payload, encode time and TTL."""

    status: int
    uid: int
    gid: int
    payload: bytes
    encode_time: int  # seconds since the epoch, as the encoding host's munged stamped it
    ttl: int  # seconds
    message: str = ""  # munged's own wording of a failure (for logs)

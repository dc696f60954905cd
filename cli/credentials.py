"""credential_for: the client's side of MUNGE authentication (docs/identity.md §3).

The local munged encodes a credential whose payload binds one request (method, path?query and
the body's SHA-256); the client sends it as ``Authorization: MUNGE <credential>``. libmunge is
used through ctypes when it loads (no process per request), else the ``munge`` command.

``METASCHED_CREDENTIAL_FILE`` sends that file's credential instead of asking munged: for tests
and debugging only — the service verifies it like any other, so it grants nothing.

Standard library only (a job's own interpreter may import it).
"""

from __future__ import annotations

import os

from tenants import libmunge
from tenants.credential import SCHEME, request_payload

CREDENTIAL_FILE_ENV = "METASCHED_CREDENTIAL_FILE"
SOCKET_ENV = "METASCHED_MUNGE_SOCKET"
_MAX_FILE_BYTES = 65_536


class CredentialError(Exception):
    """CredentialError says in one line why no credential could be made."""


def credential_for(method: str, target: str, body: bytes, *, socket: str | None = None) -> str:
    """credential_for is a MUNGE credential bound to this request, from munged (or METASCHED_CREDENTIAL_FILE)."""
    path = os.environ.get(CREDENTIAL_FILE_ENV)
    if path:
        return _from_file(path)
    payload = request_payload(method, target, body)
    socket = socket or os.environ.get(SOCKET_ENV) or None
    lib = libmunge.load()
    try:
        if lib is not None:
            return lib.encode(payload, socket)
        from tenants import munge_command  # only without libmunge: it imports subprocess (~5 ms)

        return munge_command.encode(payload, socket)
    except OSError as exc:
        where = f" at {socket}" if socket else ""
        raise CredentialError(f"cannot get a MUNGE credential from munged{where}: {exc}") from None


def authorization_header(method: str, target: str, body: bytes, *, socket: str | None = None) -> str:
    """authorization_header is the ``MUNGE <credential>`` value of the Authorization header."""
    return f"{SCHEME} {credential_for(method, target, body, socket=socket)}"


def _from_file(path: str) -> str:
    """_from_file reads one credential from a file (as ``munge -n > FILE`` writes it)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise CredentialError(f"{CREDENTIAL_FILE_ENV}: cannot read {path}: {exc.strerror or exc}") from None
    text = data.decode("ascii", "replace").strip()
    if not text or len(data) > _MAX_FILE_BYTES:
        raise CredentialError(f"{CREDENTIAL_FILE_ENV}: {path} holds no credential")
    return text

"""Local mode: the CLI on the store directly, for root on the server host (``--db`` / ``METASCHED_DB``).

Ordinary commands go through the API; an explicit store (``--db URL``, ``METASCHED_DB`` or
``METASCHED_DB_FILE``) is how root recovers when the service is down, and how the daemon's own
tools (``db``, ``serve``) reach it. Anyone else is refused: the API's authentication and
authorization are the way in, and a second way around them would make them optional. For a
SQLite store, the owner of the file (or of the folder it would be created in) also qualifies:
that user could open the file anyway.

Local mode speaks the API too: ``local_backend`` runs the service's app (``meta.service.http``) in
this process, with the local user as the authenticated caller, so every command takes the same
routes, checks and answers as over the socket.

Imported only when a command runs in local mode: it pulls in the store, the models and FastAPI.
"""

from __future__ import annotations

import os
from pathlib import Path

from cli.asgi_local import InProcessTransport
from cli.client import ApiClient
from cli.remote import ApiBackend
from meta.service.api import Service
from meta.service.http import create_app
from meta.store.db import FILE_ENV_VAR, resolve_url
from tenants.auth import Identity
from tenants.identity import Principal, effective_user, local_principal
from tenants.secrets import DEFAULT_ROOT

LOCAL_ADDRESS = "local"  # what error messages name as the API's address in local mode
LOCAL_MAX_BODY_BYTES = 1 << 30  # the store was reachable without a bound before: a large batch stays possible

REFUSED = (
    "local mode (--db) is for root on the server host; use the API instead "
    "(unset METASCHED_DB / METASCHED_DB_FILE, --api or METASCHED_API picks the service)"
)


class LocalModeRefused(Exception):
    """LocalModeRefused: a non-root caller asked for direct store access (exit 2)."""


def explicit_store(db_url: str | None) -> bool:
    """explicit_store tells whether the caller named a store (--db, METASCHED_DB or METASCHED_DB_FILE)."""
    return bool(db_url or os.environ.get(FILE_ENV_VAR))


def check_local_mode(url: str) -> None:
    """check_local_mode allows root, and for SQLite the store file's owner; raises LocalModeRefused otherwise."""
    uid = os.geteuid()
    if uid == 0:
        return
    owner = sqlite_owner(url)
    if owner is None or owner != uid:
        raise LocalModeRefused(REFUSED)


def sqlite_owner(url: str) -> int | None:
    """sqlite_owner is the uid owning a SQLite store file (or the folder it would go in); None otherwise."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return None
    path = Path(url[len(prefix):].split("?", 1)[0]).expanduser()
    for candidate in (path, path.parent):
        try:
            return candidate.stat().st_uid
        except OSError:
            continue
    return None


def check_store(db_url: str | None) -> None:
    """check_store resolves the named store and lets only root or the SQLite file's owner use it (LocalModeRefused)."""
    check_local_mode(resolve_url(db_url))


def open_store(db_url: str | None) -> Service:
    """open_store opens the named store and brings its schema up, unchecked: for ``serve`` and after check_store."""
    return Service.open(db_url)


def open_service(db_url: str | None) -> Service:
    """open_service opens the named store for local mode (after check_local_mode) and brings its schema up."""
    url = resolve_url(db_url)
    check_local_mode(url)
    return Service.open(url)


class LocalAuthenticator:
    """LocalAuthenticator takes every in-process request as the local user (check_local_mode already let it in)."""

    def authenticate(self, authorization_header: str | None, method: str, target: str, body: bytes) -> Identity:
        """authenticate is the effective uid and gid, whatever the (placeholder) credential says."""
        return Identity(uid=os.geteuid(), gid=os.getegid(), user=effective_user())


def local_backend(service: Service, tenant: str | None, secrets_root: str | None = None) -> ApiBackend:
    """local_backend is the API of local mode: the service's app in process, the caller the local user (an admin, or scoped to ``tenant``)."""

    def principal_for(_identity: Identity, asked: str | None) -> Principal:
        return local_principal(asked or tenant)

    app = create_app(service, LocalAuthenticator(), principal_for, secrets_root=secrets_root or DEFAULT_ROOT,
                     max_body_bytes=LOCAL_MAX_BODY_BYTES)  # fmt: skip
    client = ApiClient(LOCAL_ADDRESS, credential=lambda _m, _t, _b: "local", transport=InProcessTransport(app))
    return ApiBackend(client, tenant)

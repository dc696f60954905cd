"""Local mode: the CLI on the store directly, for root on the server host (``--db`` / ``METASCHED_DB``).

Ordinary commands go through the API; an explicit store (``--db URL``, ``METASCHED_DB`` or
``METASCHED_DB_FILE``) is how root recovers when the service is down, and how the daemon's own
tools (``db``, ``serve``) reach it. Anyone else is refused: the API's authentication and
authorization are the way in, and a second way around them would make them optional. For a
SQLite store, the owner of the file (or of the folder it would be created in) also qualifies:
that user could open the file anyway.

Imported only when a command runs in local mode: it pulls in the store and the models.
"""

from __future__ import annotations

import os
from pathlib import Path

from meta.service.api import Service
from meta.service.operations import Operations
from meta.store.db import FILE_ENV_VAR, resolve_url
from tenants.identity import local_principal
from tenants.secrets import DEFAULT_ROOT

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


def open_service(db_url: str | None) -> Service:
    """open_service opens the named store for local mode (after check_local_mode) and brings its schema up."""
    url = resolve_url(db_url)
    check_local_mode(url)
    return Service.open(url)


def local_operations(service: Service, tenant: str | None, secrets_root: str | None = None) -> Operations:
    """local_operations is the Backend of local mode: the local user (an admin, or scoped to ``tenant``)."""
    return Operations(service, local_principal(tenant), secrets_root=secrets_root or DEFAULT_ROOT)

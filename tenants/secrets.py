"""Tenant secrets: values live in files only the job's node reads; metasched stores names only.

Layout: ``<root>/<tenant>/<NAME>``, directory 0700 and files 0600. A job spec lists secret
*names*; the rendered sbatch script reads the values from ``<root>/<tenant>/`` when the job
starts, so no value is ever in a spec, the store, Slurm's stored job script, a log or the audit.

A secret is addressed only by a validated tenant and name, never by a path. The root is the
operator's choice; below it nothing is followed through a symlink: a tenant folder must be a
real folder we own that no one else may write, and files are opened relative to it
(``meta.store.private_files``).

A secret may name the users whose jobs may read it (issue 22, S15): ``.<NAME>.users`` beside it,
one user name a line, set by the tenant's coordinators and admins. Without that file every
member's job that declares the secret reads it, as before; a secret's users stay when its value
is set again (a rotation never widens it) and go when it is deleted.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from meta.store.private_files import (
    UnsafePath,
    open_private_dir,
    opened_dir,
    read_regular,
    regular_files,
    remove_regular,
    write_private,
)
from tenants.names import check_secret_name, check_tenant_name, check_user_name

DEFAULT_ROOT = "/etc/metasched/secrets"

__all__ = ["DEFAULT_ROOT", "UnsafePath", "delete_secret", "read_secret", "secret_names", "secret_users", "set_secret",
           "set_secret_users", "tenant_dir"]  # fmt: skip
MAX_VALUE_BYTES = 1024 * 1024  # what secret_admin accepts; a larger file is cut, never read whole
MAX_USERS = 256  # users one secret may name
_USERS_LIMIT = MAX_USERS * 33  # the users file's bytes: 256 names of at most 32 characters, a line each


def tenant_dir(root: str | Path, tenant: str) -> Path:
    """tenant_dir is where one tenant's secret files live."""
    return Path(root) / check_tenant_name(tenant)


@contextlib.contextmanager
def _tenant_fd(root: str | Path, tenant: str, *, create: bool) -> Iterator[int | None]:
    """_tenant_fd opens the tenant's private folder (None when it, or the root, does not exist)."""
    fd = _open_tenant(root, check_tenant_name(tenant), create=create)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _open_tenant(root: str | Path, tenant: str, *, create: bool) -> int | None:
    """_open_tenant opens (creating when asked) the tenant folder below the root, never via a symlink."""
    try:
        with opened_dir(root, create=create) as root_fd:
            return open_private_dir(root_fd, tenant, create=create, label=f"secrets folder of tenant {tenant}")
    except FileNotFoundError:
        if create:
            raise
        return None  # no root yet: no tenant has a secret


def set_secret(root: str | Path, tenant: str, name: str, value: str) -> Path:
    """set_secret writes one secret value with owner-only permissions (replacing it atomically)."""
    check_secret_name(name)
    with _tenant_fd(root, tenant, create=True) as fd:
        assert fd is not None  # create=True never yields None
        write_private(fd, name, value)
    return tenant_dir(root, tenant) / name


def secret_names(root: str | Path, tenant: str) -> list[str]:
    """secret_names lists the names (never the values) a tenant has set: regular files only."""
    with _tenant_fd(root, tenant, create=False) as fd:
        if fd is None:
            return []
        return [name for name in regular_files(fd) if not name.startswith(".")]


def read_secret(root: str | Path, tenant: str, name: str) -> str | None:
    """read_secret is one secret's value (a regular file, never through a link); None when there is none."""
    check_secret_name(name)
    with _tenant_fd(root, tenant, create=False) as fd:
        if fd is None:
            return None
        data = read_regular(fd, name, MAX_VALUE_BYTES)
    return None if data is None else data.decode("utf-8", "replace")


def delete_secret(root: str | Path, tenant: str, name: str) -> bool:
    """delete_secret removes one secret and its users; False when it did not exist (a link or folder is no secret)."""
    check_secret_name(name)
    with _tenant_fd(root, tenant, create=False) as fd:
        if fd is None:
            return False
        remove_regular(fd, _users_file(name))
        return remove_regular(fd, name)


def _users_file(name: str) -> str:
    """_users_file names a secret's users file (a leading dot: never listed as a secret)."""
    return f".{name}.users"


def secret_users(root: str | Path, tenant: str, name: str) -> list[str] | None:
    """secret_users is who may read a secret from their jobs (None: every member of the tenant)."""
    check_secret_name(name)
    with _tenant_fd(root, tenant, create=False) as fd:
        data = None if fd is None else read_regular(fd, _users_file(name), _USERS_LIMIT)
    if data is None:
        return None
    return [line for line in data.decode("utf-8", "replace").splitlines() if line]


def set_secret_users(root: str | Path, tenant: str, name: str, users: list[str] | None) -> None:
    """set_secret_users names who may read a secret from their jobs (None: every member again); 0600 like it."""
    check_secret_name(name)
    if users is not None:
        if len(users) > MAX_USERS:
            raise ValueError(f"a secret names at most {MAX_USERS} users")
        users = sorted({check_user_name(user) for user in users})
    with _tenant_fd(root, tenant, create=users is not None) as fd:
        if fd is None:
            return
        if users is None:
            remove_regular(fd, _users_file(name))
        else:
            # an empty list is kept: no job may read the secret until a coordinator names someone
            write_private(fd, _users_file(name), "".join(f"{user}\n" for user in users))

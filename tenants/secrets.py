"""Tenant secrets: values live in files only the job's node reads; metasched stores names only.

Layout: ``<root>/<tenant>/<NAME>``, directory 0700 and files 0600. A job spec lists secret
*names*; the rendered sbatch script reads the values from ``<root>/<tenant>/`` when the job
starts, so no value is ever in a spec, the store, Slurm's stored job script, a log or the audit.

A secret is addressed only by a validated tenant and name, never by a path. The root is the
operator's choice; below it nothing is followed through a symlink: a tenant folder must be a
real folder we own that no one else may write, and files are opened relative to it
(``meta.store.private_files``).
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
from tenants.names import check_secret_name, check_tenant_name

DEFAULT_ROOT = "/etc/metasched/secrets"

__all__ = ["DEFAULT_ROOT", "UnsafePath", "delete_secret", "read_secret", "secret_names", "set_secret", "tenant_dir"]
MAX_VALUE_BYTES = 1024 * 1024  # what secret_admin accepts; a larger file is cut, never read whole


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
    """delete_secret removes one secret; False when it did not exist (a link or folder is no secret)."""
    check_secret_name(name)
    with _tenant_fd(root, tenant, create=False) as fd:
        return fd is not None and remove_regular(fd, name)

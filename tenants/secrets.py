"""Tenant secrets: values live in files only the job's node reads; metasched stores names only.

Layout: ``<root>/<tenant>/<NAME>``, directory 0700 and files 0600. A job spec lists secret
*names*; the rendered sbatch script reads the values from ``<root>/<tenant>/`` when the job
starts, so no value is ever in a spec, the store, Slurm's stored job script, a log or the audit.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from meta.model.errors import InvalidRequest

DEFAULT_ROOT = "/etc/metasched/secrets"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def tenant_dir(root: str | Path, tenant: str) -> Path:
    """tenant_dir is where one tenant's secret files live."""
    if not _TENANT.match(tenant):
        raise InvalidRequest(f"invalid tenant name {tenant!r}")
    return Path(root) / tenant


def set_secret(root: str | Path, tenant: str, name: str, value: str) -> Path:
    """set_secret writes one secret value with owner-only permissions (replacing it atomically)."""
    if not _NAME.match(name) or name.startswith("METASCHED_"):
        raise InvalidRequest(f"invalid secret name {name!r}: use an environment variable name")
    directory = tenant_dir(root, tenant)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)
    temp = directory / f".{name}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(value)
    os.replace(temp, directory / name)
    return directory / name


def secret_names(root: str | Path, tenant: str) -> list[str]:
    """secret_names lists the names (never the values) a tenant has set."""
    directory = tenant_dir(root, tenant)
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


def delete_secret(root: str | Path, tenant: str, name: str) -> bool:
    """delete_secret removes one secret; False when it did not exist."""
    path = tenant_dir(root, tenant) / name
    if not path.is_file():
        return False
    path.unlink()
    return True

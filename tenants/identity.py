"""Caller identities: who is asking, and which tenant's jobs they may see and touch."""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass

from meta.model.errors import NotFound

TENANT_ENV = "METASCHED_TENANT"


@dataclass(frozen=True)
class Principal:
    """Principal is the caller: a tenant member (sees only that tenant) or an admin (sees all)."""

    name: str
    tenant: str | None = None  # None = admin

    @property
    def is_admin(self) -> bool:
        """is_admin tells whether the caller may act across tenants."""
        return self.tenant is None

    def may_access(self, tenant: str) -> bool:
        """may_access tells whether the caller may see or change a job of ``tenant``."""
        return self.tenant is None or self.tenant == tenant

    def require_access(self, tenant: str, what: str) -> None:
        """require_access raises NotFound (never "forbidden": existence must not leak) when denied."""
        if not self.may_access(tenant):
            raise NotFound(f"{what} not found")


def local_principal(tenant: str | None = None) -> Principal:
    """local_principal is the CLI's caller: the OS user, scoped to --tenant or METASCHED_TENANT."""
    return Principal(name=effective_user(), tenant=tenant or os.environ.get(TENANT_ENV) or None)


def effective_user() -> str:
    """effective_user names the effective uid from the passwd database (``uid<N>`` without an entry)."""
    # never LOGNAME/USER (what getpass.getuser reads): the caller sets those, and this is the audit actor
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid{uid}"


ADMIN = Principal(name="admin")

"""Caller identities: who is asking, and which tenant's jobs they may see and touch."""

from __future__ import annotations

import getpass
import os
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
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid{os.getuid()}"
    return Principal(name=user, tenant=tenant or os.environ.get(TENANT_ENV) or None)


ADMIN = Principal(name="admin")

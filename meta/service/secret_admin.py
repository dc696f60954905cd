"""Tenant secrets through the API: names for members; set, delete and allow audited by name (never the value).

The file change happens inside the audit row's transaction: a refused or failed change leaves no
row, and a change is never made without its row.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy.orm import Session

from meta.model.errors import Forbidden, InvalidRequest, NotFound
from meta.store import audit
from meta.store.db import Database
from tenants.identity import Principal
from tenants.names import check_secret_name, check_tenant_name, check_user_name
from tenants.secrets import MAX_USERS, delete_secret, read_secret, secret_names, set_secret, set_secret_users

MAX_SECRET_BYTES = 1024 * 1024  # a key or a token file; anything larger is not a secret value


def check_caller(principal: Principal, tenant: str, name: str | None = None, *, change: bool = False) -> None:
    """check_caller refuses bad names (InvalidRequest) and a caller outside the tenant (Forbidden).

    Names: members and admins; set and delete: the tenant's coordinators and admins (§4).
    """
    check_tenant_name(tenant)
    if name is not None:
        check_secret_name(name)
    allowed = principal.may_manage_secrets(tenant) if change else principal.may_view_secret_names(tenant)
    if not allowed:
        role = "a coordinator of" if change and principal.may_view_secret_names(tenant) else "a member of"
        raise Forbidden(f"secrets of {tenant}: you are not {role} {tenant}")


def names(root: str | Path, principal: Principal, tenant: str) -> list[str]:
    """names lists the tenant's secret names (never values)."""
    check_caller(principal, tenant)
    return secret_names(root, tenant)


def put(db: Database, root: str | Path, principal: Principal, tenant: str, name: str, value: str) -> None:
    """put sets one secret value (owner-only file), audited as ``secret.set`` by name."""
    check_caller(principal, tenant, name, change=True)
    if not value:
        raise InvalidRequest("a secret value must not be empty")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_SECRET_BYTES:
        raise InvalidRequest(f"a secret value is at most {MAX_SECRET_BYTES // 1024} KiB")
    with _audited(db, principal, "secret.set", tenant, name):
        set_secret(root, tenant, name, value)


def delete(db: Database, root: str | Path, principal: Principal, tenant: str, name: str) -> None:
    """delete removes one secret, audited as ``secret.delete`` by name; NotFound when there was none."""
    check_caller(principal, tenant, name, change=True)
    with _audited(db, principal, "secret.delete", tenant, name):
        if not delete_secret(root, tenant, name):
            raise NotFound(f"secret {name} of {tenant} not found")


def allow(
    db: Database, root: str | Path, principal: Principal, tenant: str, name: str, users: list[str] | None
) -> list[str] | None:
    """allow names the users whose jobs may read a secret (None: every member), audited as ``secret.allow``.

    Coordinators and admins, as for set; the secret must exist. Returns the list as stored.
    """
    check_caller(principal, tenant, name, change=True)
    if users is not None:
        if len(users) > MAX_USERS:
            raise InvalidRequest(f"a secret names at most {MAX_USERS} users")
        users = sorted({check_user_name(user) for user in users})
    if read_secret(root, tenant, name) is None:
        raise NotFound(f"secret {name} of {tenant} not found")
    readers = users if users is not None else "every member"
    with _audited(db, principal, "secret.allow", tenant, name, users=readers):
        set_secret_users(root, tenant, name, users)
    return users


@contextlib.contextmanager
def _audited(
    db: Database, principal: Principal, action: str, tenant: str, name: str, **detail: object
) -> Iterator[Session]:
    """_audited runs one secret change in a store transaction that records it (the name, never the value)."""
    with db.session() as session:
        yield session  # the change; when it raises, nothing is recorded and the transaction rolls back
        audit.record(session, principal.name, action, f"{tenant}/{name}", tenant=tenant, name=name, **detail)

"""Caller identities and what they may do: docs/identity.md §4, as methods of ``Principal``.

A Principal is built from Slurm's associations for an authenticated uid
(``tenants.associations``): the accounts (tenants) the user is a member of, the accounts it
coordinates, and whether it is an admin. ``tenant`` narrows what the caller acts on to one of
them (``--tenant`` / ``-A``); it is never a privilege.

Two older forms stay: ``Principal(name, tenant)`` without accounts, as the direct-to-store CLI and
the tests build it, is a member *and coordinator* of ``tenant`` (before issue 12 every member could
cancel any of its tenant's jobs), or an admin when ``tenant`` is None; ``ADMIN`` is the daemon's own.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from meta.model.errors import InvalidRequest, NotFound

TENANT_ENV = "METASCHED_TENANT"
# sbatch's own words for an account the user has no association in (msbatch and -A users know them)
INVALID_ACCOUNT = "Invalid account or account/partition combination specified"


class InvalidAccount(InvalidRequest):
    """InvalidAccount: the tenant asked for is not one of the caller's Slurm accounts (sbatch's wording)."""

    def __init__(self, account: str | None = None) -> None:
        super().__init__(INVALID_ACCOUNT if account is None else f"{INVALID_ACCOUNT}: {account}")
        self.account = account


@dataclass(frozen=True)
class Principal:
    """Principal is the caller: user, uid/gid, Slurm accounts, coordinated accounts, admin, chosen tenant."""

    name: str
    tenant: str | None = None  # the tenant acted on (None: every tenant the caller may see)
    uid: int | None = None
    gid: int | None = None
    accounts: frozenset[str] | None = None  # None: the older form (see the module docstring)
    default_account: str | None = None
    coordinates: frozenset[str] = field(default_factory=frozenset)
    admin: bool | None = None  # None: the older form (admin when no tenant)
    # (account, QOS) pairs the caller's Slurm associations allow (sacctmgr's QOS field; priority rights)
    qos: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    # does Slurm have this account (asked for an admin's submit outside its own accounts; None: not checked)
    account_exists: Callable[[str], bool] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.accounts is None:
            legacy = frozenset({self.tenant}) if self.tenant else frozenset()
            object.__setattr__(self, "accounts", legacy)
            object.__setattr__(self, "coordinates", frozenset(self.coordinates) | legacy)
            if self.admin is None:
                object.__setattr__(self, "admin", self.tenant is None)
        else:
            object.__setattr__(self, "accounts", frozenset(self.accounts))
            object.__setattr__(self, "coordinates", frozenset(self.coordinates))
        object.__setattr__(self, "qos", frozenset(self.qos))
        if self.admin is None:
            object.__setattr__(self, "admin", False)

    # --- who the caller is ------------------------------------------------------------------

    @property
    def is_admin(self) -> bool:
        """is_admin tells whether the caller is an admin (AdminLevel Operator/Administrator, root, SlurmUser)."""
        return bool(self.admin)

    def in_scope(self, tenant: str) -> bool:
        """in_scope tells whether ``tenant`` is within the tenant the caller chose to act on (if any)."""
        return self.tenant is None or self.tenant == tenant

    def is_member(self, tenant: str) -> bool:
        """is_member tells whether the caller has an association in ``tenant``."""
        return tenant in (self.accounts or frozenset())

    def qos_in(self, tenant: str) -> frozenset[str]:
        """qos_in is the QOS the caller's association in ``tenant`` allows (what sbatch --qos may name there)."""
        return frozenset(name for account, name in self.qos if account == tenant)

    def visible_tenants(self) -> frozenset[str] | None:
        """visible_tenants is the set of tenants whose jobs and settings the caller sees (None: all)."""
        if self.is_admin:
            return None if self.tenant is None else frozenset({self.tenant})
        mine = self.accounts or frozenset()
        return mine if self.tenant is None else mine & {self.tenant}

    # --- docs/identity.md §4 ----------------------------------------------------------------

    def may_view_tenant(self, tenant: str) -> bool:
        """may_view_tenant: members of the tenant and admins (within the chosen tenant)."""
        return self.in_scope(tenant) and (self.is_admin or self.is_member(tenant))

    def may_submit(self, tenant: str) -> bool:
        """may_submit: members of the tenant and admins, for an account Slurm has (as sbatch: tenants are accounts)."""
        if not self.may_view_tenant(tenant):
            return False
        if self.is_member(tenant) or self.account_exists is None:
            return True
        return self.account_exists(tenant)

    def may_view_job(self, tenant: str) -> bool:
        """may_view_job (status, explain, outputs, checkpoints): members of the job's tenant and admins."""
        return self.may_view_tenant(tenant)

    def may_act_on_job(self, tenant: str, owner_uid: int | None) -> bool:
        """may_act_on_job (cancel, retry): the job's owner, coordinators of its tenant, admins."""
        if not self.may_view_job(tenant):
            return False
        return self.is_admin or self.may_coordinate(tenant) or self.is_owner(owner_uid)

    def may_read_job_env(self, tenant: str, owner_uid: int | None) -> bool:
        """may_read_job_env (a job's stored environment): its owner and admins, as Slurm (issue 22, S7)."""
        return self.may_view_job(tenant) and (self.is_admin or self.is_owner(owner_uid))

    def is_owner(self, owner_uid: int | None) -> bool:
        """is_owner tells whether the caller's uid is the job's owner (never for a job without one)."""
        return owner_uid is not None and self.uid is not None and owner_uid == self.uid

    def may_coordinate(self, tenant: str) -> bool:
        """may_coordinate tells whether the caller is a Slurm coordinator of ``tenant``."""
        return self.in_scope(tenant) and tenant in self.coordinates

    def may_admin(self) -> bool:
        """may_admin (tenant set: guarantees, priority classes): admins."""
        return self.is_admin

    def may_view_secret_names(self, tenant: str) -> bool:
        """may_view_secret_names: members of the tenant and admins."""
        return self.may_view_tenant(tenant)

    def may_manage_secrets(self, tenant: str) -> bool:
        """may_manage_secrets (secret set/delete): coordinators of the tenant and admins."""
        return self.in_scope(tenant) and (self.is_admin or self.may_coordinate(tenant))

    def audit_tenants(self) -> frozenset[str] | None:
        """audit_tenants is whose audit lines the caller reads: None = all (admins), else its tenants'."""
        return self.visible_tenants()

    # --- the older names, kept for their callers ----------------------------------------------

    def may_access(self, tenant: str) -> bool:
        """may_access tells whether the caller may see ``tenant`` and its jobs (``may_view_tenant``)."""
        return self.may_view_tenant(tenant)

    def require_access(self, tenant: str, what: str) -> None:
        """require_access raises NotFound (never "forbidden": existence must not leak) when denied."""
        if not self.may_view_tenant(tenant):
            raise NotFound(f"{what} not found")

    def scoped(self, tenant: str | None) -> Principal:
        """scoped is the same caller acting on ``tenant`` (no check: ``principal_for`` checks membership)."""
        return Principal(
            name=self.name,
            tenant=tenant,
            uid=self.uid,
            gid=self.gid,
            accounts=self.accounts,
            default_account=self.default_account,
            coordinates=self.coordinates,
            admin=self.admin,
            qos=self.qos,
            account_exists=self.account_exists,
        )


def member(name: str, uid: int, accounts: Iterable[str], *, coordinates: Iterable[str] = (),
           admin: bool = False, tenant: str | None = None, gid: int | None = None,
           qos: Iterable[str] = ()) -> Principal:
    """member builds a Principal with explicit accounts, the first being the default, each allowing ``qos`` (tests, tools)."""
    ordered = list(accounts)
    allowed = list(qos)
    return Principal(
        name=name,
        tenant=tenant,
        uid=uid,
        gid=uid if gid is None else gid,
        accounts=frozenset(ordered),
        default_account=ordered[0] if ordered else None,
        coordinates=frozenset(coordinates),
        admin=admin,
        qos=frozenset((account, name) for account in ordered for name in allowed),
    )


def local_principal(tenant: str | None = None) -> Principal:
    """local_principal is the direct-to-store CLI's caller: the OS user, scoped to --tenant or METASCHED_TENANT."""
    # the older form: whoever can open the store is its admin; --tenant narrows to a member's view
    return Principal(
        name=effective_user(),
        tenant=tenant or os.environ.get(TENANT_ENV) or None,
        uid=os.geteuid(),
        gid=os.getegid(),
    )


def effective_user() -> str:
    """effective_user names the effective uid from the passwd database (``uid<N>`` without an entry)."""
    # never LOGNAME/USER (what getpass.getuser reads): the caller sets those, and this is the audit actor
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid{uid}"


ADMIN = Principal(name="admin")

"""Slurm's associations as metasched's authorization: who may act for which tenant (docs/identity.md §4).

An authenticated uid is a user name (passwd); ``sacctmgr show user name=U withcoord withassoc``
gives its accounts, DefaultAccount, AdminLevel and coordinated accounts. Entries are cached per
user for ``ttl_s`` (60 s) and read again on a miss: a user not cached yet, or a tenant outside the
cached accounts (someone was just added) — at most once per ``miss_interval_s`` per user, so a
caller repeating a refused request cannot make metasched hammer slurmdbd. The account list (does
tenant T exist, for admins) and the cluster's name and SlurmUser are cached the same way.

When slurmdbd cannot be read, a cached entry (even an expired one) is used; without one the
request fails with ``AccountingUnavailable``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from meta.model.errors import MetaschedError
from slurm_bridge.client import SlurmClient
from slurm_bridge.errors import SlurmError
from slurm_bridge.parse.config import SlurmConfig
from slurm_bridge.parse.sacctmgr import UserAssociations
from tenants.auth import Identity
from tenants.identity import InvalidAccount, Principal

log = logging.getLogger("metasched.associations")

TTL_S = 60.0
MISS_INTERVAL_S = 1.0
ADMIN_LEVELS = frozenset({"Operator", "Administrator"})


class AccountingUnavailable(MetaschedError):
    """AccountingUnavailable: Slurm's accounting (slurmdbd) cannot be read and nothing is cached."""


@dataclass(frozen=True)
class _Entry:
    """_Entry is one cached read and when it was made (monotonic seconds)."""

    value: object
    at: float


class AssociationCache:
    """AssociationCache answers "who is this uid in Slurm" from sacctmgr, cached for a minute."""

    def __init__(
        self,
        client: SlurmClient,
        *,
        ttl_s: float = TTL_S,
        miss_interval_s: float = MISS_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self.miss_interval_s = miss_interval_s
        self._clock = clock
        self._lock = threading.Lock()  # guards the dicts only: sacctmgr runs outside it
        self._users: dict[str, _Entry] = {}
        self._accounts: _Entry | None = None
        self._config: _Entry | None = None

    # --- principals ---------------------------------------------------------------------------

    def principal_for(self, identity: Identity, requested_tenant: str | None = None) -> Principal:
        """principal_for is the caller's Principal, acting on ``requested_tenant`` when given.

        A tenant that is not one of the caller's accounts (for an admin: not an account of the
        cluster) is refused with sbatch's wording (``InvalidAccount``).
        """
        config = self.slurm_config()
        user = self.user(identity.user, want_account=requested_tenant)
        cluster = config.cluster_name if config else None
        accounts = user.accounts(cluster) if user else frozenset()
        admin = (
            identity.uid == 0
            or (config is not None and (identity.uid == config.slurm_user_uid or identity.user == config.slurm_user))
            or (user is not None and user.admin_level in ADMIN_LEVELS)
        )
        if requested_tenant is not None:
            allowed = self.account_exists(requested_tenant) if admin else requested_tenant in accounts
            if not allowed:
                raise InvalidAccount(requested_tenant)
        return Principal(
            name=identity.user,
            tenant=requested_tenant,
            uid=identity.uid,
            gid=identity.gid,
            accounts=accounts,
            default_account=(user.default_account or None) if user else None,
            coordinates=user.coordinates if user else frozenset(),
            admin=admin,
            # the QOS each association allows: a priority class above the job kind's needs one of its name
            qos=frozenset((a, q) for a in accounts for q in user.qos(a, cluster)) if user else frozenset(),
            # an admin may submit for any account, but only one Slurm has (read again on a miss)
            account_exists=self.account_exists if admin else None,
        )

    # --- cached reads -------------------------------------------------------------------------

    def user(self, name: str, want_account: str | None = None) -> UserAssociations | None:
        """user is a user's associations (None: unknown to Slurm), read again when stale or missing ``want_account``."""
        with self._lock:
            entry = self._users.get(name)
        if entry is not None and not self._stale(entry, name, want_account):
            return entry.value  # type: ignore[return-value]
        try:
            found = self.client.user_associations(name)
        except ValueError:
            return None  # a passwd name sacctmgr cannot be asked about has no association either
        except SlurmError as exc:
            return self._fallback(entry, f"user {name}", exc)  # type: ignore[return-value]
        value = next((u for u in found if u.user == name), None)
        with self._lock:
            self._users[name] = _Entry(value, self._clock())
        return value

    def account_exists(self, account: str) -> bool:
        """account_exists tells whether the cluster has ``account`` (read again on a miss)."""
        names = self._account_names(refresh=False)
        if account not in names:
            names = self._account_names(refresh=True)
        return account in names

    def slurm_config(self) -> SlurmConfig | None:
        """slurm_config is the cluster name and SlurmUser (None while scontrol cannot be read)."""
        with self._lock:
            entry = self._config
        if entry is not None and entry.value is not None:
            return entry.value  # type: ignore[return-value]  # the config changes only with a restart
        if entry is not None and self._clock() - entry.at < self.ttl_s:
            return None  # failed recently: do not ask on every request
        try:
            value: SlurmConfig | None = self.client.slurm_config()
        except SlurmError as exc:
            log.warning("cannot read scontrol show config (SlurmUser and cluster unknown): %s", exc)
            value = None
        with self._lock:
            self._config = _Entry(value, self._clock())
        return value

    def forget(self) -> None:
        """forget drops every cached entry (tests; an operator's sacctmgr change shows at once)."""
        with self._lock:
            self._users.clear()
            self._accounts = None

    def _account_names(self, *, refresh: bool) -> frozenset[str]:
        """_account_names is the set of the cluster's accounts, cached like users."""
        with self._lock:
            entry = self._accounts
        now = self._clock()
        if entry is not None:
            age = now - entry.at
            if age < self.ttl_s and (not refresh or age < self.miss_interval_s):
                return entry.value  # type: ignore[return-value]
        try:
            shares = self.client.account_shares()
        except SlurmError as exc:
            return self._fallback(entry, "the account list", exc)  # type: ignore[return-value]
        config = self.slurm_config()
        names = frozenset(
            s.account for s in shares if config is None or not s.cluster or s.cluster == config.cluster_name
        )
        with self._lock:
            self._accounts = _Entry(names, self._clock())
        return names

    def _stale(self, entry: _Entry, name: str, want_account: str | None) -> bool:
        """_stale: past the TTL, or a miss (unknown user, or an account not in its set) past the miss interval."""
        age = self._clock() - entry.at
        if age >= self.ttl_s:
            return True
        user: UserAssociations | None = entry.value  # type: ignore[assignment]
        missed = user is None or (want_account is not None and want_account not in user.accounts())
        return missed and age >= self.miss_interval_s

    def _fallback(self, entry: _Entry | None, what: str, exc: Exception) -> object:
        """_fallback serves a cached value (even stale) while accounting cannot be read, else raises."""
        if entry is not None:
            log.warning("sacctmgr failed, using the cached %s: %s", what, exc)
            return entry.value
        reason = " ".join(str(exc).split())[:300]  # one line, whatever sacctmgr printed
        raise AccountingUnavailable(f"Slurm accounting cannot be read ({what}): {reason}") from None

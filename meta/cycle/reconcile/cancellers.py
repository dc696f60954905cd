"""Who cancelled a job in Slurm: a plain ``scancel`` by someone allowed to cancel it is a cancel.

Slurm 22.05 records the canceller in accounting only: sacct's State reads ``CANCELLED by <uid>``
(measured on the dev cluster: alice's own scancel gives ``CANCELLED by 2001``, root's
``CANCELLED by 0``); squeue and ``scontrol show job`` say ``CANCELLED`` without a uid. The uid
is resolved as the API resolves a caller: its user name, that user's coordinated accounts and
AdminLevel from ``sacctmgr``; root is an admin. The job's owner, a coordinator of its tenant or
an admin may cancel it, as through ``metasched cancel``. SlurmUser is not a person: a cancel by
slurmctld itself (a purge) cannot be attributed, nor can an unknown uid.
"""

from __future__ import annotations

import logging
import pwd
import time
from collections.abc import Callable
from dataclasses import dataclass

from slurm_bridge.client import SlurmClient
from slurm_bridge.errors import SlurmError

log = logging.getLogger("metasched.reconciler")

ADMIN_LEVELS = frozenset({"Operator", "Administrator"})


@dataclass(frozen=True)
class Canceller:
    """Canceller is the user behind a Slurm cancel: name, uid, coordinated accounts, admin."""

    uid: int
    name: str
    coordinates: frozenset[str]
    admin: bool

    def may_cancel(self, tenant: str, owner_uid: int | None) -> bool:
        """may_cancel: the job's owner, a coordinator of its tenant or an admin (as ``metasched cancel``)."""
        return self.admin or tenant in self.coordinates or (owner_uid is not None and owner_uid == self.uid)


def user_name(uid: int) -> str | None:
    """user_name is the login name of ``uid`` on this host, None if it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


class CancellerLookup:
    """CancellerLookup resolves a canceller's uid through the passwd database and sacctmgr, cached a while."""

    def __init__(
        self,
        client: SlurmClient,
        ttl_s: float = 300.0,
        names: Callable[[int], str | None] = user_name,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self.names = names
        self.clock = clock
        self._cache: dict[int, tuple[float, Canceller | None]] = {}

    def __call__(self, uid: int) -> Canceller | None:
        """__call__ is the Canceller of ``uid``, or None when no person can be named (SlurmUser, unknown uid)."""
        cached = self._cache.get(uid)
        if cached is not None and self.clock() - cached[0] < self.ttl_s:
            return cached[1]
        try:
            found = self._resolve(uid)
        except SlurmError as exc:  # an unreadable accounting concludes nothing, and is not cached
            log.warning("cannot tell who uid %s is (sacctmgr): %s", uid, exc)
            return None
        self._cache[uid] = (self.clock(), found)
        return found

    def _resolve(self, uid: int) -> Canceller | None:
        """_resolve reads the uid's name, then its Slurm user record."""
        config = self.client.slurm_config()
        if config.slurm_user_uid is not None and uid == config.slurm_user_uid and uid != 0:
            return None  # slurmctld's own cancel: no person asked for it
        name = self.names(uid)
        if name is None:
            return Canceller(uid, "root", frozenset(), True) if uid == 0 else None
        records = self.client.user_associations(name)
        record = records[0] if records else None
        admin = uid == 0 or (record is not None and record.admin_level in ADMIN_LEVELS)
        return Canceller(uid, name, record.coordinates if record else frozenset(), admin)

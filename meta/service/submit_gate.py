"""SubmitGate: the API's noisy-neighbour guard — pending-task limits and a submit-rate bucket per tenant.

The decisions are ``meta.policy.admission``'s (the simulator makes the same ones). Everything is
counted in tasks (an array element or an inference partition is one): a request of 100 jobs of
20,000 partitions is 2,000,000 tasks, not 100 jobs (issue 22, S4). What this adds is state, kept
cheap: pending tasks per tenant and per (tenant, user) come from one grouped query over the live
tasks (the ``tasks.state`` index), refreshed at most every ``refresh_s``, plus the tasks this
replica admitted since that read began; every tenant has a cap on its pending tasks
(``max_pending_tasks``: the tenant's setting, else the gate's default); limits are read from the tenants table
every ``limits_refresh_s``. One lock makes check-and-reserve atomic inside a replica; with
several API replicas a tenant may overshoot by what the others admitted within ``refresh_s``.

Refusals are audited (``job.submit.refused``) once per (tenant, user, reason) every
``audit_every_s`` with the number refused since, so a flood cannot turn into a flood of audit rows;
``on_refusal(tenant, reason)`` counts every one (the API's metric).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sqlalchemy import func, select

from meta.model.errors import MetaschedError
from meta.policy.admission import (
    DEFAULT_BURST,
    DEFAULT_MAX_PENDING_TASKS,
    DEFAULT_RATE,
    Refusal,
    SubmitLimits,
    TokenBucket,
    pending_refusal,
    rate_refusal,
)
from meta.store import audit
from meta.store.db import Database
from meta.store.models import Job, Task, Tenant

log = logging.getLogger("metasched.submit_gate")

LIVE = ("pending", "scheduled", "running")  # a job with such a task is pending or running, as Slurm counts
REFRESH_S = 1.0
LIMITS_REFRESH_S = 5.0
AUDIT_EVERY_S = 10.0


class SubmitRefused(MetaschedError):
    """SubmitRefused: a tenant or user is over a submit limit; ``reason`` is admission's code."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


class SubmitLimitExceeded(SubmitRefused):
    """SubmitLimitExceeded: the submit would take a tenant or user past a pending-task limit (HTTP 403)."""


class SubmitRateLimited(SubmitRefused):
    """SubmitRateLimited: the tenant's submit-rate bucket is empty for now (HTTP 429 with Retry-After)."""


@dataclass
class Admission:
    """Admission is one admitted submit's reservation: tasks (``jobs``) per tenant, tokens per tenant."""

    user: str
    jobs: dict[str, int]
    at: float
    settled_at: float | None = None  # when its transaction ended: a read begun later counts its jobs
    released: bool = False


@dataclass
class _Counts:
    """_Counts is the last grouped read of pending jobs and what this replica admitted since it began."""

    tenants: dict[str, int] = field(default_factory=dict)
    users: dict[tuple[str, str], int] = field(default_factory=dict)
    read_at: float = -1e18  # monotonic time the read began
    since: list[Admission] = field(default_factory=list)


class SubmitGate:
    """SubmitGate admits or refuses submits per tenant (pending tasks, submit rate), audited and counted."""

    def __init__(
        self,
        db: Database,
        *,
        rate: float = DEFAULT_RATE,
        burst: int = DEFAULT_BURST,
        max_pending_tasks: int | None = DEFAULT_MAX_PENDING_TASKS,
        refresh_s: float = REFRESH_S,
        limits_refresh_s: float = LIMITS_REFRESH_S,
        audit_every_s: float = AUDIT_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        on_refusal: Callable[[str, str], None] | None = None,
    ) -> None:
        self.db = db
        self.rate, self.burst = rate, burst
        self.max_pending_tasks = max_pending_tasks  # a tenant's cap unless it sets its own (None: none)
        self.refresh_s, self.limits_refresh_s, self.audit_every_s = refresh_s, limits_refresh_s, audit_every_s
        self.clock = clock
        self.on_refusal = on_refusal
        self._lock = threading.Lock()
        self._counts = _Counts()
        self._limits: dict[str, SubmitLimits] = {}
        self._limits_at = -1e18
        self._buckets: dict[str, TokenBucket] = {}
        self._audited: dict[tuple[str, str, str], tuple[float, int]] = {}  # key -> (last line at, refused since)

    # --- the two calls the service makes ------------------------------------------------------

    def admit(self, user: str, jobs: Mapping[str, int]) -> Admission:
        """admit reserves ``jobs`` (tenant -> new tasks) for ``user`` or raises SubmitRefused (audited)."""
        with self._lock:
            now = self.clock()
            self._refresh(now)
            refusal, tenant = self._check(user, jobs, now)
            if refusal is None:
                admission = Admission(user, dict(jobs), now)
                self._counts.since.append(admission)
                return admission
        self._refused(user, tenant, refusal, sum(jobs.values()))
        raise (SubmitRateLimited if refusal.reason == "rate" else SubmitLimitExceeded)(refusal)

    def settle(self, admission: Admission, created: Mapping[str, int]) -> None:
        """settle ends a reservation whose transaction committed: ``created`` tasks per tenant stay counted.

        Jobs an idempotency key answered (not created) give their tokens and their count back.
        """
        with self._lock:
            self._give_back(admission, created)
            admission.jobs = {t: n for t, n in created.items() if n}
            admission.settled_at = self.clock()

    def release(self, admission: Admission) -> None:
        """release undoes the reservation of a submit that stored nothing (its transaction failed)."""
        with self._lock:
            if admission.released:
                return
            self._give_back(admission, {})
            admission.released = True
            if admission in self._counts.since:
                self._counts.since.remove(admission)

    def _give_back(self, admission: Admission, kept: Mapping[str, int]) -> None:
        for tenant, count in admission.jobs.items():
            unused = count - kept.get(tenant, 0)
            if unused > 0 and tenant in self._buckets:
                self._buckets[tenant].give_back(unused)

    def precheck(self, user: str, tenant: str, count: int) -> None:
        """precheck refuses at once a request its tenant cannot take now (before its job files are parsed); spends nothing."""
        with self._lock:
            now = self.clock()
            self._refresh(now)
            limits = self._limits_of(tenant)
            wait = self._bucket(tenant, limits, now).wait_for(count, now)
            refusal = rate_refusal(tenant, limits, count, wait) if wait > 0 else self._pending(user, tenant, limits, count)
        if refusal is not None:
            self._refused(user, tenant, refusal, count)
            raise (SubmitRateLimited if refusal.reason == "rate" else SubmitLimitExceeded)(refusal)

    # --- state --------------------------------------------------------------------------------

    def limits(self, tenant: str) -> SubmitLimits:
        """limits is the tenant's effective settings (stored ones over the service's defaults)."""
        with self._lock:
            self._refresh(self.clock())
            return self._limits_of(tenant)

    def pending(self, tenant: str, user: str | None = None) -> int:
        """pending is the tenant's (or the user's in it) pending tasks as the gate counts them now."""
        with self._lock:
            self._refresh(self.clock())
            return self._pending_count(tenant, user)

    def _check(self, user: str, jobs: Mapping[str, int], now: float) -> tuple[Refusal | None, str]:
        """_check takes every tenant's tokens or none, after the pending-task limits allow the submit."""
        for tenant, count in sorted(jobs.items()):
            refusal = self._pending(user, tenant, self._limits_of(tenant), count)
            if refusal is not None:
                return refusal, tenant
        taken: list[tuple[str, int]] = []
        for tenant, count in sorted(jobs.items()):
            limits = self._limits_of(tenant)
            wait = self._bucket(tenant, limits, now).take(count, now)
            if wait > 0:
                for done, n in taken:
                    self._buckets[done].give_back(n)
                return rate_refusal(tenant, limits, count, wait), tenant
            taken.append((tenant, count))
        return None, ""

    def _pending(self, user: str, tenant: str, limits: SubmitLimits, count: int) -> Refusal | None:
        caps = (limits.max_pending, limits.max_pending_tasks, limits.user_limit(user))
        if all(cap is None for cap in caps):
            return None
        return pending_refusal(
            tenant, user, limits, self._pending_count(tenant, None), self._pending_count(tenant, user), count
        )

    def _pending_count(self, tenant: str, user: str | None) -> int:
        counts = self._counts
        stored = counts.tenants.get(tenant, 0) if user is None else counts.users.get((tenant, user), 0)
        recent = sum(a.jobs.get(tenant, 0) for a in counts.since if user is None or a.user == user)
        return stored + recent

    def _bucket(self, tenant: str, limits: SubmitLimits, now: float) -> TokenBucket:
        bucket = self._buckets.get(tenant)
        if bucket is None:
            bucket = self._buckets[tenant] = TokenBucket(limits.rate, limits.burst, now)
        elif (bucket.rate, bucket.burst) != (limits.rate, limits.burst):
            bucket.retune(limits.rate, limits.burst)
        return bucket

    def _limits_of(self, tenant: str) -> SubmitLimits:
        return self._limits.get(tenant) or SubmitLimits(
            rate=self.rate, burst=self.burst, max_pending_tasks=self.max_pending_tasks
        )

    def _refresh(self, now: float) -> None:
        """_refresh re-reads the pending counts (and the limits) when they are older than their interval."""
        if now - self._limits_at >= self.limits_refresh_s:
            self._limits = self._read_limits()
            self._limits_at = now
        if now - self._counts.read_at < self.refresh_s:
            return
        tenants, users = self._read_counts()
        # admissions settled before this read began are in it; the others may not be (counted twice at worst)
        since = [a for a in self._counts.since if not a.released and (a.settled_at is None or a.settled_at >= now)]
        self._counts = _Counts(tenants, users, now, since)

    def _read_counts(self) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
        """_read_counts is pending tasks per (tenant, submitter): one grouped query over the live tasks."""
        query = (
            select(Job.tenant, Job.submitted_by, func.count(Task.id))
            .join(Job, Job.id == Task.job_id)
            .where(Task.state.in_(LIVE))
            .group_by(Job.tenant, Job.submitted_by)
        )
        tenants: dict[str, int] = {}
        users: dict[tuple[str, str], int] = {}
        with self.db.session() as session:
            for tenant, user, count in session.execute(query):
                tenants[tenant] = tenants.get(tenant, 0) + count
                users[(tenant, user)] = count
        return tenants, users

    def _read_limits(self) -> dict[str, SubmitLimits]:
        """_read_limits is every tenant's stored submit limits over the service's defaults."""
        with self.db.session() as session:
            rows = session.execute(select(Tenant.name, Tenant.submit_limits, Tenant.sources)).all()
        return {name: self._settings(stored or {}, sources or {}) for name, stored, sources in rows}

    def _settings(self, stored: Mapping[str, object], sources: Mapping[str, str]) -> SubmitLimits:
        def number(key: str) -> int | None:
            value = stored.get(key)
            # a non-finite number stored before it was refused (issue 22, S13) is no setting, not a 500
            return int(value) if isinstance(value, int | float) and math.isfinite(value) else None

        users = stored.get("users")
        rate = stored.get("rate")
        rate = rate if isinstance(rate, int | float) and math.isfinite(rate) and rate > 0 else None
        tasks = number("max_pending_tasks")
        return SubmitLimits(
            max_pending=number("max_pending"),
            max_pending_per_user=number("max_pending_per_user"),
            max_pending_tasks=self.max_pending_tasks if tasks is None else tasks,
            users={str(k): int(v) for k, v in users.items()} if isinstance(users, dict) else {},
            rate=float(rate) if isinstance(rate, int | float) else self.rate,
            burst=number("burst") or self.burst,
            sources={k: sources[k] for k in ("max_pending", "max_pending_per_user") if k in sources},
        )

    # --- refusals -----------------------------------------------------------------------------

    def _refused(self, user: str, tenant: str, refusal: Refusal, count: int) -> None:
        """_refused counts a refusal and audits it, at most once per key every ``audit_every_s``."""
        if self.on_refusal is not None:
            self.on_refusal(tenant, refusal.reason)
        key = (tenant, user, refusal.reason)
        now = self.clock()
        with self._lock:
            last, quiet = self._audited.get(key, (-1e18, 0))
            if now - last < self.audit_every_s:
                self._audited[key] = (last, quiet + 1)
                return
            self._audited[key] = (now, 0)
        try:
            with self.db.session() as session:
                audit.record(session, user, "job.submit.refused", tenant, tenant=tenant, reason=refusal.reason,
                             tasks=count, limit=refusal.limit, current=refusal.current,
                             refused_since_last_line=quiet, message=refusal.message)  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - the refusal stands even when its audit line cannot be written
            log.warning("cannot audit a refused submit of %s in %s: %s", user, tenant, exc)


def gate_for(
    db: Database, rate: float | None, burst: int | None, on_refusal: Callable[[str, str], None] | None
) -> SubmitGate:
    """gate_for is the API's gate with the service's default bucket (None: admission's defaults)."""
    return SubmitGate(db, rate=DEFAULT_RATE if rate is None else rate, burst=DEFAULT_BURST if burst is None else burst,
                      on_refusal=on_refusal)  # fmt: skip

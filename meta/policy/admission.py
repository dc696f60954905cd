"""Admission of submits per tenant: pending-job limits and a submit-rate token bucket (issue 16).

Pure (no I/O, no clock of its own): the API service (``meta.service.submit_gate``) and the
simulator (``meta.sim``) both call it with the counts and the time they own, so the flood the
simulator replays meets exactly the refusals a real tenant would.

Limits count tasks, not jobs (issue 22, S4): what costs the store and the period is tasks, and
Slurm counts each array element as one job against ``MaxSubmitJobs``; here an array element or an
inference partition counts one, as a pending or running task. Limits: tenant-wide (Slurm's account
``GrpSubmitJobs``), per user (the user association's ``MaxSubmitJobs``, which Slurm copies down
from the account), metasched's own cap on a tenant's pending tasks (``max_pending_tasks``, on by
default in the API), and the rate: a token bucket per tenant, one token per task, ``burst`` deep,
refilled at ``rate`` per second.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_RATE = 2_000.0  # tasks per second per tenant: a tenth of what one writer stores (docs/benchmarks.md)
DEFAULT_BURST = 20_000  # the largest request (meta.model.limits.MAX_TASKS_PER_REQUEST)
# a tenant's pending or running tasks, all users, unless an admin sets its own: two of the largest
# requests and more; ten tenants at the cap are 500,000 tasks, a period the daemon keeps short
DEFAULT_MAX_PENDING_TASKS = 50_000
RATE = "rate"
TENANT_PENDING = "tenant_pending"
USER_PENDING = "user_pending"
TENANT_TASKS = "tenant_tasks"
REASONS = (RATE, TENANT_PENDING, USER_PENDING, TENANT_TASKS)
# sbatch's words for an association over its submit limit (ESLURM_ACCOUNTING_POLICY)
POLICY_VIOLATION = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"


@dataclass(frozen=True)
class SubmitLimits:
    """SubmitLimits is one tenant's admission settings; None means no limit."""

    max_pending: int | None = None  # the tenant's pending tasks, all users (GrpSubmitJobs)
    max_pending_per_user: int | None = None  # each user's, unless ``users`` names it (MaxSubmitJobs)
    max_pending_tasks: int | None = None  # metasched's cap on the tenant's pending tasks (the API's default)
    users: Mapping[str, int] = field(default_factory=dict)  # per-user limits from Slurm's user associations
    rate: float = DEFAULT_RATE
    burst: int = DEFAULT_BURST
    sources: Mapping[str, str] = field(default_factory=dict)  # max_pending / max_pending_per_user -> slurm | metasched

    def user_limit(self, user: str) -> int | None:
        """user_limit is ``user``'s own pending-task limit in this tenant (None: none)."""
        return self.users.get(user, self.max_pending_per_user)


@dataclass(frozen=True)
class Refusal:
    """Refusal is why a submit is refused: the reason code, one line, and when a retry may pass (rate only)."""

    reason: str
    message: str
    limit: float
    current: float
    retry_after_s: float | None = None


class TokenBucket:
    """TokenBucket is a per-tenant submit budget: ``burst`` tokens, refilled at ``rate`` per second."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = max(rate, 1e-9)
        self.burst = max(burst, 1)
        self.tokens = float(self.burst)
        self.at = now

    def retune(self, rate: float, burst: int) -> None:
        """retune takes new settings, keeping the tokens (capped by the new depth)."""
        self.rate, self.burst = max(rate, 1e-9), max(burst, 1)
        self.tokens = min(self.tokens, float(self.burst))

    def wait_for(self, count: int, now: float) -> float:
        """wait_for is how long until ``count`` tokens are there (0: now; inf: more than the bucket holds)."""
        self._refill(now)
        if count > self.burst:
            return math.inf
        return max(0.0, (count - self.tokens) / self.rate)

    def take(self, count: int, now: float) -> float:
        """take spends ``count`` tokens and returns 0, or spends none and returns the wait (``wait_for``)."""
        wait = self.wait_for(count, now)
        if wait == 0.0:
            self.tokens -= count
        return wait

    def reserve(self, count: int, now: float, max_wait_s: float) -> float | None:
        """reserve spends ``count`` tokens ahead of time (the bucket may go into debt) and returns the wait until they are there.

        None when that wait is longer than ``max_wait_s``: nothing is spent. The API's per-peer
        pace (meta/service/peer_pace.py) makes a request wait this long instead of refusing it.
        """
        wait = self.wait_for(count, now)
        if wait > max_wait_s:
            return None
        self.tokens -= count
        return wait

    def give_back(self, count: int) -> None:
        """give_back returns tokens of a submit that stored nothing."""
        self.tokens = min(float(self.burst), self.tokens + count)

    def _refill(self, now: float) -> None:
        if now > self.at:
            self.tokens = min(float(self.burst), self.tokens + (now - self.at) * self.rate)
        self.at = max(self.at, now)


def rate_refusal(tenant: str, limits: SubmitLimits, count: int, wait_s: float) -> Refusal:
    """rate_refusal is the 429 of a submit the bucket cannot cover yet (or ever, for a batch deeper than it)."""
    budget = f"{limits.rate:g} tasks/s, bursts of {limits.burst:,}"
    if math.isinf(wait_s):
        message = (f"tenant {tenant} may submit {budget}: a request of {count:,} tasks never fits; "
                   "send smaller batches")  # fmt: skip
        return Refusal(RATE, message, limits.burst, count, None)
    message = (f"metasched temporarily unable to accept job: tenant {tenant}'s submit rate limit ({budget}) "
               f"is reached; retry in {wait_s:.1f} s")  # fmt: skip
    return Refusal(RATE, message, limits.rate, count, wait_s)


def pending_refusal(
    tenant: str, user: str, limits: SubmitLimits, tenant_pending: int, user_pending: int, adding: int
) -> Refusal | None:
    """pending_refusal refuses ``adding`` tasks that would take the tenant or the user past a pending limit."""
    tasks_cap = limits.max_pending_tasks
    if tasks_cap is not None and tenant_pending + adding > tasks_cap:
        return Refusal(TENANT_TASKS, f"{POLICY_VIOLATION}: tenant {tenant} has {tenant_pending:,} pending or running "
                       f"tasks of {tasks_cap:,} (metasched tenant setting max_pending_tasks); this submit adds "
                       f"{adding:,} tasks", tasks_cap, tenant_pending)  # fmt: skip
    cap = limits.max_pending
    if cap is not None and tenant_pending + adding > cap:
        where = _where(limits, "max_pending", "GrpSubmitJobs")
        return Refusal(TENANT_PENDING, f"{POLICY_VIOLATION}: AssocGrpSubmitJobsLimit, tenant {tenant} has "
                       f"{tenant_pending:,} pending or running tasks of {cap:,} ({where}); this submit adds {adding:,} tasks",
                       cap, tenant_pending)  # fmt: skip
    own = limits.user_limit(user)
    if own is not None and user_pending + adding > own:
        where = "MaxSubmitJobs, Slurm" if user in limits.users else _where(limits, "max_pending_per_user", "MaxSubmitJobs")
        return Refusal(USER_PENDING, f"{POLICY_VIOLATION}: AssocMaxSubmitJobLimit, user {user} has "
                       f"{user_pending:,} pending or running tasks in {tenant} of {own:,} ({where}); this submit "
                       f"adds {adding:,} tasks", own, user_pending)  # fmt: skip
    return None


def _where(limits: SubmitLimits, setting: str, slurm_name: str) -> str:
    """_where names where a limit comes from: Slurm's association or metasched's tenant setting."""
    if limits.sources.get(setting) == "slurm":
        return f"{slurm_name}, Slurm"
    return f"metasched tenant setting {setting}"

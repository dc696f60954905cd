"""The simulator's submit gate: the API's per-tenant limits (``meta.policy.admission``) in trace time.

A tenant with limits submits through its own client, in order: a refused job waits at the head
of that client's backlog (later arrivals queue behind it, as a flooding script retries its next
request) and is tried again after the refusal's ``Retry-After`` (rate) or ``retry_s`` (pending
limit). Pending jobs are the tenant's waiting and running ones, as the API counts them. The
simulator has no users: the tenant's name stands for its one submitting user.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from meta.policy.admission import SubmitLimits, TokenBucket, pending_refusal

DEFAULT_RETRY_S = 2.0  # the daemon's period: a refused client retries about that often


@dataclass(slots=True)
class SimGate:
    """SimGate admits a tenant's arrivals against its limits; refused ones wait in its backlog."""

    limits: Mapping[str, SubmitLimits]
    retry_s: float = DEFAULT_RETRY_S
    pending: dict[str, int] = field(default_factory=dict)
    backlog: dict[str, deque[int]] = field(default_factory=dict)
    retries: list[tuple[float, str]] = field(default_factory=list)  # heap of (when, tenant)
    refused: dict[str, int] = field(default_factory=dict)  # refusals per reason
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)

    def offer(self, tenant: str, index: int, now: float) -> bool:
        """offer is True when job ``index`` of ``tenant`` enters now; False: it waits in the backlog."""
        if tenant not in self.limits:
            return True
        queue = self.backlog.setdefault(tenant, deque())
        if queue or not self._admit(tenant, now):
            queue.append(index)
            return False
        return True

    def due(self, now: float) -> list[int]:
        """due is the backlog's jobs admitted at ``now`` (each tenant's head first, while admitted)."""
        admitted: list[int] = []
        while self.retries and self.retries[0][0] <= now:
            _, tenant = heapq.heappop(self.retries)
            queue = self.backlog.get(tenant)
            while queue and self._admit(tenant, now):
                admitted.append(queue.popleft())
        return admitted

    def next_retry(self) -> float | None:
        """next_retry is when a backlog is tried again (None: none waits)."""
        return self.retries[0][0] if self.retries else None

    def finished(self, tenant: str) -> None:
        """finished counts one of the tenant's jobs out of its pending ones (it ended)."""
        if tenant in self.pending:
            self.pending[tenant] -= 1

    def _admit(self, tenant: str, now: float) -> bool:
        """_admit takes one job's place and token, or schedules the backlog's next try."""
        limits = self.limits[tenant]
        count = self.pending.get(tenant, 0)
        refusal = pending_refusal(tenant, tenant, limits, count, count, 1)
        wait = self.retry_s
        if refusal is None:
            bucket = self._buckets.get(tenant) or self._buckets.setdefault(
                tenant, TokenBucket(limits.rate, limits.burst, now)
            )
            wait = bucket.take(1, now)
            if wait == 0.0:
                self.pending[tenant] = count + 1
                return True
            reason = "rate"
        else:
            reason = refusal.reason
        self.refused[reason] = self.refused.get(reason, 0) + 1
        heapq.heappush(self.retries, (now + max(wait, 1e-6), tenant))
        return False

"""Limits count tasks, not jobs (issue 22, S4): the per-request task cap, pending tasks per tenant, the rate in tasks.

The service on SQLite and PostgreSQL, with and without a ``SubmitGate`` (hand-driven clock). A
request of more tasks than ``MAX_TASKS_PER_REQUEST`` is refused with nothing stored, whatever
its number of jobs; a tenant's pending tasks stop at its ``max_pending_tasks`` (the gate's default
unless set), the other tenants go on; array elements count against ``max_pending`` one each, as
Slurm counts them; the rate bucket is charged one token per task.
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from meta.model.errors import InvalidRequest
from meta.model.limits import MAX_TASKS_PER_REQUEST
from meta.policy.admission import POLICY_VIOLATION
from meta.service.api import Service
from meta.service.submit_gate import SubmitGate, SubmitLimitExceeded, SubmitRateLimited
from meta.store.models import Job, Task
from tenants.identity import member
from tenants.quotas import set_tenant
from tests.runtime.support import evaluation, inference

ALICE = member("alice", 2001, ["tenant-a"])
BOB = member("bob", 2002, ["tenant-b"])


class Clock:
    """Clock is a monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _gated(service: Service, clock: Clock, **settings: float) -> Service:
    service.gate = SubmitGate(service.db, clock=clock, **settings)  # type: ignore[arg-type]
    return service


def _stored(service: Service) -> tuple[int, int]:
    with service.db.session() as session:
        return session.scalar(select(func.count(Job.id))) or 0, session.scalar(
            select(func.count(Task.id))
        ) or 0


def _partitioned(tenant: str, partitions: int, name: str = "infer") -> object:
    return inference("/tmp/ms-out", name=name, tenant=tenant, partitions=partitions)


def test_a_batch_over_the_task_cap_is_refused_whole_with_nothing_stored(service: Service) -> None:
    # few jobs, many tasks: what S4 sent (100 jobs x 20,000 partitions), scaled down
    batch = [_partitioned("tenant-a", MAX_TASKS_PER_REQUEST // 2 + 1, f"i{n}") for n in range(2)]
    with pytest.raises(InvalidRequest) as refused:
        service.submit_many(batch, principal=ALICE)
    message = str(refused.value)
    assert message.startswith(POLICY_VIOLATION) and "\n" not in message
    assert (
        f"{MAX_TASKS_PER_REQUEST + 2:,} tasks" in message and f"at most {MAX_TASKS_PER_REQUEST:,}" in message
    )
    assert _stored(service) == (0, 0)


def test_the_largest_request_allowed_is_stored(service: Service) -> None:
    batch = [_partitioned("tenant-a", MAX_TASKS_PER_REQUEST - 1, "big"), evaluation("one", tenant="tenant-a")]
    results = service.submit_many(batch, principal=ALICE)
    assert all(r.created for r in results)
    assert _stored(service) == (2, MAX_TASKS_PER_REQUEST)


def test_a_tenants_pending_tasks_stop_at_its_cap_and_the_others_go_on(service: Service) -> None:
    clock = Clock()
    gated = _gated(service, clock, max_pending_tasks=100)  # the gate's default for every tenant
    gated.submit(_partitioned("tenant-a", 60), principal=ALICE)
    with pytest.raises(SubmitLimitExceeded) as refused:
        gated.submit(_partitioned("tenant-a", 41, "more"), principal=ALICE)
    assert refused.value.refusal.reason == "tenant_tasks"
    message = str(refused.value)
    assert message.startswith(POLICY_VIOLATION) and "60 pending or running tasks of 100" in message
    assert "max_pending_tasks" in message and "adds 41 tasks" in message
    gated.submit(_partitioned("tenant-a", 40, "fits"), principal=ALICE)  # exactly at the cap
    gated.submit(_partitioned("tenant-b", 100), principal=BOB)  # another tenant has its own cap
    assert _stored(gated) == (3, 200)
    clock.now += 10
    assert gated.gate is not None and gated.gate.pending("tenant-a") == 100  # read back from the store


def test_an_admin_raises_one_tenants_task_cap(service: Service) -> None:
    clock = Clock()
    gated = _gated(service, clock, max_pending_tasks=10)
    with gated.db.session() as session:
        set_tenant(session, "tenant-a", actor="test", submit={"max_pending_tasks": 500})
    clock.now += 10  # past the gate's limits refresh
    gated.submit(_partitioned("tenant-a", 500), principal=ALICE)
    with pytest.raises(SubmitLimitExceeded):
        gated.submit(_partitioned("tenant-b", 11), principal=BOB)  # the default still holds for tenant-b


def test_array_elements_count_against_max_pending_one_each(service: Service) -> None:
    clock = Clock()
    gated = _gated(service, clock)
    with gated.db.session() as session:
        set_tenant(session, "tenant-a", actor="test", submit={"max_pending": 10})
    clock.now += 10
    with pytest.raises(SubmitLimitExceeded) as refused:
        gated.submit(
            evaluation("arr", tenant="tenant-a", array={"indexes": list(range(11))}), principal=ALICE
        )
    assert refused.value.refusal.reason == "tenant_pending" and "adds 11 tasks" in str(refused.value)
    assert _stored(gated) == (0, 0)


def test_the_rate_bucket_is_charged_per_task(service: Service) -> None:
    clock = Clock()
    gated = _gated(service, clock, rate=10.0, burst=100)
    with pytest.raises(SubmitRateLimited) as never:
        gated.submit(_partitioned("tenant-a", 101), principal=ALICE)  # one job, deeper than the bucket
    assert "101 tasks never fits" in str(never.value)
    gated.submit(_partitioned("tenant-a", 100), principal=ALICE)
    with pytest.raises(SubmitRateLimited) as later:
        gated.submit(_partitioned("tenant-a", 20, "next"), principal=ALICE)
    assert later.value.refusal.retry_after_s == pytest.approx(2.0)  # 20 tokens at 10 per second
    clock.now += 2.0
    gated.submit(_partitioned("tenant-a", 20, "next"), principal=ALICE)


def test_a_retry_is_charged_its_requeued_tasks(service: Service) -> None:
    clock = Clock()
    gated = _gated(service, clock, max_pending_tasks=10)
    first = gated.submit(_partitioned("tenant-a", 8, "first"), principal=ALICE).job.short_id
    gated.cancel(first, principal=ALICE)  # its 8 tasks end cancelled: retriable
    clock.now += 10  # the gate reads the store again: nothing pending
    second = gated.submit(_partitioned("tenant-a", 8, "second"), principal=ALICE).job.short_id
    clock.now += 10  # the gate reads the store again: 8 pending
    with pytest.raises(SubmitLimitExceeded) as refused:
        gated.retry(first, principal=ALICE)
    assert refused.value.refusal.reason == "tenant_tasks" and "adds 8 tasks" in str(refused.value)
    assert {t.state for t in gated.status(first, principal=ALICE).tasks} == {"cancelled"}
    gated.cancel(second, principal=ALICE)
    clock.now += 10
    assert len(gated.retry(first, principal=ALICE)) == 8

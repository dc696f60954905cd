"""submit_many: a batch of jobs in one transaction, a few statements whatever its size, keyed retries."""

from __future__ import annotations

import pytest
from sqlalchemy import event, func, select

from meta.model.errors import Conflict, InvalidRequest
from meta.service.api import MAX_BATCH_JOBS, Service
from meta.store.models import Job, Task
from tenants.identity import InvalidAccount, member
from tests.runtime.support import evaluation, inference

ALICE = member("alice", 2001, ["tenant-a"])


def _count(service: Service, model: type) -> int:
    with service.db.session() as session:
        return session.scalar(select(func.count()).select_from(model))


def _statements(service: Service) -> list[str]:
    seen: list[str] = []
    event.listen(service.db.engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    return seen


def test_a_batch_stores_every_job_with_its_tasks(service: Service) -> None:
    specs = [evaluation(f"e{i}", "tenant-a") for i in range(3)] + [inference("/tmp/sm-out", "inf", "tenant-b")]
    results = service.submit_many(specs)
    assert [r.created for r in results] == [True] * 4
    assert [r.job.name for r in results] == ["e0", "e1", "e2", "inf"]
    assert [r.job.tasks for r in results] == [{"pending": 1}] * 3 + [{"pending": 2}]
    assert _count(service, Job) == 4 and _count(service, Task) == 5
    assert {j.short_id for j in service.list_jobs()} == {r.job.short_id for r in results}
    assert service.status(results[3].job.short_id).summary.tenant == "tenant-b"


def test_statements_do_not_grow_with_the_batch(service: Service) -> None:
    service.submit_many([evaluation("warm", "tenant-a")])  # tenants and queues exist from here on
    seen = _statements(service)
    service.submit_many([evaluation("one", "tenant-a")])
    one = len(seen)
    seen.clear()
    service.submit_many([evaluation(f"e{i}", "tenant-a") for i in range(200)])
    assert len(seen) <= one + 2, seen  # executemany on SQLite counts once per chunk


def test_the_same_keyed_batch_answers_the_same_jobs(service: Service) -> None:
    specs = [evaluation(f"k{i}", "tenant-a") for i in range(3)]
    first = service.submit_many(specs, idempotency_key="sweep-7")
    again = service.submit_many(specs, idempotency_key="sweep-7")
    assert [r.job.id for r in again] == [r.job.id for r in first]
    assert [r.created for r in again] == [False] * 3 and _count(service, Job) == 3
    changed = [evaluation("k0", "tenant-a", command="python other.py"), *specs[1:]]
    with pytest.raises(Conflict, match="sweep-7/0"):
        service.submit_many(changed, idempotency_key="sweep-7")


def test_one_refused_job_stores_none_of_the_batch(service: Service) -> None:
    specs = [evaluation("mine", "tenant-a"), evaluation("theirs", "tenant-b")]
    with pytest.raises(InvalidAccount):
        service.submit_many(specs, principal=ALICE)
    assert _count(service, Job) == 0
    with pytest.raises(InvalidRequest, match="1 to"):
        service.submit_many([])
    with pytest.raises(InvalidRequest, match="1 to"):
        service.submit_many([evaluation("x", "tenant-a")] * (MAX_BATCH_JOBS + 1))

"""A job's tasks go in through the driver in bulk: the rows equal what the ORM would write."""

from __future__ import annotations

import uuid

from sqlalchemy import select

from meta.model.ids import new_uuids
from meta.model.spec import spec_from_dict
from meta.service.api import Service
from meta.store.models import Task


def test_new_uuids_are_distinct_version_4_uuids() -> None:
    ids = new_uuids(2000)
    assert len(set(ids)) == 2000
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == text


def test_a_many_partition_job_stores_every_task_as_the_orm_reads_it(service: Service) -> None:
    spec = spec_from_dict({"kind": "inference", "name": "wide", "tenant": "t", "command": "x",
                           "resources": {"cpus": 1}, "partitions": ["s0", "s1", "s2"] + [f"p{i}" for i in range(12_000)],
                           "output": "/tmp/out"})
    job = service.submit(spec).job
    with service.db.session() as session:
        tasks = list(session.scalars(select(Task).where(Task.job_id == job.id).order_by(Task.index)))
    assert [t.name for t in tasks[:4]] == ["s0", "s1", "s2", "p0"] and len(tasks) == 12_003
    first = tasks[0]
    assert (first.state, first.version, first.fencing_counter, first.attempts_made, first.retry_base) == (
        "pending", 1, 0, 0, 0)
    assert first.avoid_nodes == [] and first.reason == "submitted" and first.not_before is None
    assert first.updated_at == tasks[-1].updated_at and first.updated_at.tzinfo is not None
    assert len({t.id for t in tasks}) == len(tasks)
    assert service.status(job.short_id).summary.tasks == {"pending": 12_003}

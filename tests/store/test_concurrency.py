"""Concurrency against a real PostgreSQL: racing submitters never create duplicate jobs (I4)."""

from __future__ import annotations

import multiprocessing
import random

import pytest
from sqlalchemy import func, select

from meta.model.spec import spec_from_dict
from meta.service.api import Service
from meta.store.db import Database
from meta.store.models import Job

pytestmark = pytest.mark.postgres

PROCESSES = 4
KEYS = 100


def _spec(key: int):
    return spec_from_dict(
        {
            "kind": "evaluation",
            "name": f"eval-{key}",
            "tenant": "tenant-a",
            "resources": {"gpus": 1},
            "command": "python eval.py",
        }
    )


def _submit_all(args: tuple[str, int]) -> dict[str, str]:
    """_submit_all runs in a child process: submit every key once, in a shuffled order."""
    url, seed = args
    service = Service(Database(url))
    keys = list(range(KEYS))
    random.Random(seed).shuffle(keys)
    result = {f"key-{k}": service.submit(_spec(k), f"key-{k}").job.id for k in keys}
    service.db.dispose()
    return result


def test_four_processes_same_hundred_keys_make_exactly_hundred_jobs(pg_service: Service) -> None:
    url = pg_service.db.url
    context = multiprocessing.get_context("spawn")
    with context.Pool(PROCESSES) as pool:
        results = pool.map(_submit_all, [(url, seed) for seed in range(PROCESSES)])
    with pg_service.db.session() as session:
        jobs = session.scalar(select(func.count()).select_from(Job))
        distinct_keys = session.scalar(select(func.count(func.distinct(Job.idempotency_key))))
    assert jobs == KEYS
    assert distinct_keys == KEYS
    # every process saw the same job for the same key
    for other in results[1:]:
        assert other == results[0]
    print(f"\n{PROCESSES} processes x {KEYS} keys -> {jobs} jobs")

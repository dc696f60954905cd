"""A request that adds thousands of tasks refreshes PostgreSQL's planner statistics at once (issue 22, S4).

Without it the daemon's next read of the new tasks was planned on the old statistics (a nested
loop over every task of the job, ~1 s per 1,000 ids) and one period took 7-25 s.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from meta.service.api import Service
from meta.store.statistics import ANALYZE_AFTER_TASKS
from tests.runtime.support import inference

pytestmark = pytest.mark.postgres


def _planned_tasks(service: Service) -> float:
    with service.db.engine.connect() as connection:
        return connection.scalar(text("SELECT reltuples FROM pg_class WHERE relname = 'tasks'"))


def test_a_large_submit_leaves_the_planner_knowing_its_tasks(pg_service: Service, tmp_path) -> None:  # noqa: ANN001
    pg_service.submit(inference(str(tmp_path / "small"), partitions=10))
    before = _planned_tasks(pg_service)
    assert before < ANALYZE_AFTER_TASKS  # a small submit does not pay for ANALYZE
    pg_service.submit(inference(str(tmp_path / "large"), partitions=ANALYZE_AFTER_TASKS + 1000))
    assert _planned_tasks(pg_service) >= ANALYZE_AFTER_TASKS


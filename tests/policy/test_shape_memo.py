"""Shapes kept from pass to pass (meta/policy/shape.py ShapeMemo) are each task's shape_of, and the plans do not change.

The daemon keeps one ShapeMemo while its view hands the policy the same task objects; a task
replaced under the same id (a new object with other fields) must get its new shape.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meta.policy.config import SchedulerConfig
from meta.policy.plan import carried
from meta.policy.scheduler import schedule
from meta.policy.shape import ShapeMemo, shape_of
from meta.policy.snapshot import Snapshot
from tests.policy.builders import rv, task
from tests.policy.test_properties import CONFIGS, snapshots


def test_a_kept_shape_is_reused_for_the_same_object_and_made_again_for_a_new_one() -> None:
    memo = ShapeMemo()
    one = task("t1", gpus=1)
    first = memo.shape(one)
    assert memo.shape(one) is first and first == shape_of(one)
    wider = replace(one, per_worker=rv(2, "a100", 4, 1024))
    assert memo.shape(wider) == shape_of(wider) != first  # same id, another object: its own shape


def test_shapes_of_tasks_that_no_longer_wait_are_dropped() -> None:
    memo = ShapeMemo()
    tasks = [task(f"t{i}") for i in range(10)]
    for t in tasks:
        memo.shape(t)
    memo.keep_only(tasks[:4])
    assert set(memo._kept) == {t.task_id for t in tasks[:4]}
    memo.keep_only(tasks[:3])  # not yet twice as many kept as waiting: left as they are
    assert len(memo._kept) == 4


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(), CONFIGS, st.data())
def test_passes_with_kept_shapes_make_the_plans_of_fresh_ones(base: Snapshot, config: SchedulerConfig,
                                                               data: st.DataObject) -> None:
    memo = ShapeMemo()
    snapshot = base
    for step in range(3):
        kept = schedule(snapshot, config, record=2, repeats=True, shapes=memo)
        fresh = schedule(snapshot, config, record=2, repeats=True)
        assert kept == fresh
        # next pass: some tasks replaced by other objects under their ids, wider or narrower
        pending = tuple(
            replace(t, per_worker=rv(data.draw(st.integers(0, 4), label="gpus"), t.per_worker.gpu_type),
                    workers=data.draw(st.integers(1, 3), label="workers"))
            if data.draw(st.booleans(), label="replace") else t
            for t in snapshot.pending
        )  # fmt: skip
        snapshot = replace(snapshot, pending=pending, holds=carried(kept.held), now=snapshot.now + 30 * (step + 1))

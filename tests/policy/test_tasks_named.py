"""tasks_named (meta/policy/snapshot.py) indexes only the waiting tasks a period asks about."""

from __future__ import annotations

from meta.policy.snapshot import tasks_named
from tests.policy.builders import task


class _Untouchable:
    """_Untouchable is a queue that fails if walked."""

    def __iter__(self):  # noqa: ANN204 - the test's sentinel
        raise AssertionError("the queue was walked although no task was asked for")


def test_only_the_tasks_asked_for_are_indexed_and_none_asked_walks_nothing() -> None:
    queue = [task(f"t{i}") for i in range(6)]
    named = tasks_named(queue, {"t1", "t4", "gone"})
    assert {tid: t.task_id for tid, t in named.items()} == {"t1": "t1", "t4": "t4"}
    assert named["t4"] is queue[4]
    assert tasks_named(_Untouchable(), set()) == {}  # type: ignore[arg-type]

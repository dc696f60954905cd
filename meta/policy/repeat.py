"""Repeats: a waiting task identical to one that just waited gets the same outcome without the pipeline.

A queue of 50,000 is mostly repeats: the shards of one inference job, the tasks of an array,
many jobs of one shape. While a pass changes nothing between two of them (no placement, hold,
preemption, counter or flag moved), the second goes exactly the way the first did: same
filters, same failed fit, same diagnosis, same refused preemption and hold. ``RepeatMemo``
keeps that outcome per task signature, stamped with the pass's state mark; any change to the
state makes every stamp stale. Exact by construction, and checked against the plain pipeline
by ``tests/policy/test_repeat_memo.py`` (the same plan, task for task).

Only the fields the per-task pipeline reads go into the signature. Tasks whose outcome also
depends on who they are (a throttled job's count, a kept or bound place) are never memoised.
"""

from __future__ import annotations

from dataclasses import dataclass

from meta.policy.plan import PendingReason
from meta.policy.shape import Shape
from meta.policy.snapshot import PendingTask

Signature = tuple
# Below this many waiting tasks a pass runs every task through the pipeline: it is cheap there, and
# a queue of few repeats (1,000 mixed tasks: 11% hits) paid ~20% more for the signatures than it saved.
REPEATS_FROM = 2000


def worth_it(pending: int, repeats: bool | None) -> bool:
    """worth_it tells whether a pass over ``pending`` waiting tasks reuses repeats (None: by the queue's length)."""
    return pending >= REPEATS_FROM if repeats is None else repeats


@dataclass(frozen=True, slots=True)
class Outcome:
    """Outcome is how a waiting task's pass ended: its shape, its reason, and whether the decision record saw it wait."""

    mark: tuple
    shape: Shape | None
    reason: PendingReason
    recorded: bool


def signature(task: PendingTask, shape: Shape, aged: bool, urgent: bool) -> Signature:
    """signature is everything the per-task pipeline reads of a waiting task, minus its identity (``shape``: its shape_of)."""
    return (
        shape, task.tenant, task.priority_class, task.kind, task.deadline, task.runtime_estimate_s,
        task.preemptible, task.data_cluster, task.data_required, task.checkpoint_cluster, aged, urgent,
    )  # fmt: skip


class RepeatMemo:
    """RepeatMemo maps a signature to the outcome of its last task, valid while the pass's mark is unchanged."""

    __slots__ = ("_outcomes", "hits")

    def __init__(self) -> None:
        self._outcomes: dict[Signature, Outcome] = {}
        self.hits = 0

    def get(self, sig: Signature, mark: tuple) -> Outcome | None:
        """get is the stored outcome for ``sig`` if the state has not changed since it was stored."""
        found = self._outcomes.get(sig)
        if found is None or found.mark != mark:
            return None
        self.hits += 1
        return found

    def put(self, sig: Signature, outcome: Outcome) -> None:
        """put stores the outcome of a task whose pass left the state unchanged."""
        self._outcomes[sig] = outcome

"""The per-job throttle (sbatch ``--array=...%N``, an inference job's ``max_parallel``): pure, one cycle at a time.

A throttled job has at most N tasks holding capacity at once: its live attempts (launching,
running or stopping, as Slurm counts an element until it ends) plus what this cycle places.
A task over the limit waits with ``JobArrayTaskLimit``, Slurm's own reason for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from meta.policy.explain import job_label
from meta.policy.plan import PendingReason, ReasonCode
from meta.policy.snapshot import PendingTask, Reservation


class Throttle:
    """Throttle counts each job's tasks holding capacity during one cycle and refuses starts beyond its limit."""

    def __init__(self, reservations: Iterable[Reservation]) -> None:
        self.holding: Counter[str] = Counter(r.job_id for r in reservations)

    def blocks(self, task: PendingTask) -> PendingReason | None:
        """blocks is the reason ``task`` may not start this cycle (None: its job is below its limit)."""
        limit = task.max_parallel
        if limit is None or self.holding[task.job_id] < limit:
            return None
        return PendingReason(
            ReasonCode.JOB_ARRAY_TASK_LIMIT,
            f"{limit} of job {job_label(task)}'s tasks already run (its limit, %{limit})",
            "starts when one of them ends",
        )

    def started(self, task: PendingTask) -> None:
        """started counts a task this cycle placed."""
        self.holding[task.job_id] += 1

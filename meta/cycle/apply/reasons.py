"""Cycle step 11 (apply), pending reasons: a waiting task's typed reason is written only when it changes.

Most waiting tasks wait for the same reason period after period; rewriting each one's row every
period made the period grow by about a millisecond per waiting task. The leader remembers what
it stored (``ReasonMemo``) and upserts only the reasons that differ, a batch per statement. The
memo is trusted only after its transaction commits and is forgotten on any failure or change of
leadership, so the store and the memo never disagree for longer than one period.

A reason is "the same" when its code, its blocker and its wording are, whatever figures the
wording quotes: "tenant-0 is ahead in fair share (share 0.40 vs yours 0.00)" holds on while the
shares move a little with every placement. Rewriting every such row each period cost tens of
thousands of rows per period at 100k waiting tasks, and reset explain's SINCE although the task
kept waiting for the same reason. The stored figures are those of the cycle the reason began in.

Waiting for capacity that other work holds is one reason too, however it is worded: that no node
was free, that another tenant ahead in fair share took this cycle's free capacity, or
higher-priority work did. Who took the capacity changes with every placement, not the task's
situation; on a full cluster with 50,000 waiting tasks the three wordings took turns from period
to period, and every period rewrote its whole quota of rows (issue 24). As Slurm's ``Resources``
and ``Priority`` hold while a job waits, the stored wording is the one the wait began with;
another kind of reason (quota, a gang, a reservation, a hold, fragmentation) is written at once.

At most ``MAX_REASONS_PER_PERIOD`` changed reasons are written in one period (the plan's order:
the front of the queue first); the rest stay unwritten in the memo and are written in the next
periods, quiet ones included (``late``: a period that rests writes the last pass's next share, so
50,000 new tasks' reasons are not written by the busy periods alone). One user's 20,000-task job otherwise made the next period upsert 20,000 rows, 6-12 s on
PostgreSQL while other requests wrote too (issue 22, ``benchmarks/bench_hostile.py`` S4).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from datetime import datetime
from functools import lru_cache
from itertools import islice

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.policy.plan import PendingReason, ReasonCode
from meta.store.chunks import chunked
from meta.store.models import TaskReason
from meta.store.upsert import upsert_rows

REASON_BATCH = 1000  # rows per statement
MAX_REASONS_PER_PERIOD = 2000  # changed reasons written per period; the rest wait for the next ones
_FIGURE = re.compile(r"\d+(?:\.\d+)?")


# the ways of waiting for capacity other work holds: one reason, whoever took it this cycle
_WAITING_FOR_CAPACITY = frozenset({ReasonCode.NO_FEASIBLE_NODE, ReasonCode.LOWER_FAIR_SHARE, ReasonCode.LOWER_PRIORITY})


def reason_identity(reason: PendingReason) -> tuple[object, ...]:
    """reason_identity is what makes a reason a different one: code, blocker, and wording without its figures."""
    if reason.code in _WAITING_FOR_CAPACITY:
        # fragmentation stays its own reason: free GPUs exist, only not on one node (explain.py)
        return ("capacity", "fragmented" in reason.message)
    return (reason.code.value, reason.blocking_job, reason.blocking_tenant, _wording(reason.message), _wording(reason.remedy))


@lru_cache(maxsize=4096)
def _wording(text: str) -> str:
    """_wording is a message with its figures blanked (a cycle has a few hundred distinct messages)."""
    return _FIGURE.sub("#", text)


class ReasonMemo:
    """ReasonMemo is the reason the store holds for each waiting task, as far as this leader wrote it."""

    def __init__(self) -> None:
        # the latest reason per task: the stored row is this reason, or one of the same identity
        self._stored: dict[str, PendingReason] = {}
        self._epoch: int | None = None
        # the last pass's changed reasons left unwritten (the plan's order): quiet periods write them
        self._late: dict[str, PendingReason] = {}

    def changed(self, reasons: Mapping[str, PendingReason]) -> dict[str, PendingReason]:
        """changed is the subset of ``reasons`` that is a different reason from the one stored."""
        stored = self._stored
        # a queue's tasks share a few hundred reason objects: each pair is compared once
        differ: dict[tuple[int, int], bool] = {}
        changed: dict[str, PendingReason] = {}
        for task_id, reason in reasons.items():
            held = stored.get(task_id)
            if held is reason:
                continue
            if held is not None:
                pair = (id(held), id(reason))
                verdict = differ.get(pair)
                if verdict is None:
                    verdict = differ[pair] = held != reason and reason_identity(held) != reason_identity(reason)
                if not verdict:
                    continue
            changed[task_id] = reason
        return changed

    def committed(self, reasons: Mapping[str, PendingReason], epoch: int, deferred: Collection[str] = ()) -> None:
        """committed records that ``reasons`` are now the stored ones, but for ``deferred`` tasks (not written this period).

        Tasks left out of ``reasons`` are no longer waiting; a deferred task keeps the reason the
        store still holds for it, if any, so the next period finds it changed and writes it.
        """
        stored = dict(reasons)
        self._late = {task_id: reasons[task_id] for task_id in deferred}
        for task_id in deferred:
            held = self._stored.get(task_id)
            if held is None:
                stored.pop(task_id, None)
            else:
                stored[task_id] = held
        self._stored, self._epoch = stored, epoch

    def late(self) -> dict[str, PendingReason]:
        """late is the next period's share of the last pass's deferred reasons, for a quiet period to write."""
        return dict(islice(self._late.items(), MAX_REASONS_PER_PERIOD))

    def written(self, reasons: Mapping[str, PendingReason]) -> None:
        """written records that ``reasons`` (from ``late``) are stored now: call it once their transaction committed."""
        for task_id, reason in reasons.items():
            self._stored[task_id] = reason
            self._late.pop(task_id, None)

    def holds(self, epoch: int) -> bool:
        """holds tells whether the memo speaks for ``epoch`` (else it must be loaded before use)."""
        return self._epoch == epoch

    def load(self, session: Session, epoch: int) -> int:
        """load takes the stored reasons as the memo: a new leader (or one after a failure) rewrites none it finds.

        Without it a new leader rewrote every waiting task's reason in its first period (100,000
        rows at 100k waiting tasks); reading them is several times cheaper. Returns rows loaded.
        """
        stored: dict[str, PendingReason] = {}
        made: dict[tuple, PendingReason | None] = {}  # a queue has a few hundred distinct reasons: each made once
        rows = session.execute(
            select(TaskReason.task_id, TaskReason.code, TaskReason.message, TaskReason.remedy,
                   TaskReason.blocking_job, TaskReason.blocking_tenant)
        )  # fmt: skip
        for task_id, *fields in rows:
            key = tuple(fields)
            if key not in made:
                made[key] = _stored_reason(*fields)
            reason = made[key]
            if reason is not None:  # None: a code this version does not know, written again
                stored[task_id] = reason
        self._stored, self._epoch, self._late = stored, epoch, {}
        return len(stored)

    def forget(self) -> None:
        """forget drops everything: the next period writes every reason again."""
        self._stored, self._epoch, self._late = {}, None, {}

    def follow(self, epoch: int | None) -> None:
        """follow forgets the memo when leadership changed since it was written (another leader wrote meanwhile)."""
        if epoch != self._epoch:
            self.forget()


def _stored_reason(code: str, message: str, remedy: str | None, blocking_job: str | None,
                   blocking_tenant: str | None) -> PendingReason | None:
    """_stored_reason is a stored row's reason (None: a code this version does not know)."""
    try:
        return PendingReason(ReasonCode(code), message, remedy or "", blocking_job, blocking_tenant)
    except ValueError:
        return None


def this_period(changed: Mapping[str, PendingReason]) -> tuple[dict[str, PendingReason], list[str]]:
    """this_period splits the changed reasons into those written now (the first MAX_REASONS_PER_PERIOD) and the deferred."""
    task_ids = list(changed)  # the plan's order
    return {task_id: changed[task_id] for task_id in task_ids[:MAX_REASONS_PER_PERIOD]}, task_ids[MAX_REASONS_PER_PERIOD:]


def store_reasons(
    session: Session,
    changed: Mapping[str, PendingReason],
    cycle_id: int,
    job_of_task: Mapping[str, str],
    now: datetime,
) -> int:
    """store_reasons upserts the changed reasons in batches; ``cycle``/``at`` say since when each holds."""
    rows = [
        {
            "task_id": task_id,
            "job_id": job_of_task.get(task_id, ""),
            "cycle": cycle_id,
            "code": reason.code.value,
            "message": reason.message,
            "remedy": reason.remedy,
            "blocking_job": reason.blocking_job,
            "blocking_tenant": reason.blocking_tenant,
            "at": now,
        }
        for task_id, reason in changed.items()
    ]
    for batch in chunked(rows, REASON_BATCH):
        upsert_rows(session, TaskReason, batch, key=("task_id",))
    return len(rows)

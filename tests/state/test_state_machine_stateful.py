"""Hypothesis stateful test: random event sequences, replays and duplicates keep the invariants.

Invariants checked after every step (I3 of docs/architecture.md and the state-machine rules):
- at most one live attempt per task;
- fencing tokens strictly increase with attempt number per task (I3);
- a task's state agrees with its attempts (scheduled/running iff a live attempt exists);
- a stimulus applied twice is recorded once and returns the same result;
- terminal attempts never change again.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from sqlalchemy import func, select

from meta.model.errors import Conflict, InvalidRequest
from meta.model.kinds import FailureCategory
from meta.model.spec import spec_from_dict
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, IllegalTransition, TaskState, attempt_can
from meta.service.api import Service
from meta.store.lifecycle import attempt_event, create_attempt
from meta.store.models import Attempt, Task, Transition
from tests.conftest import sqlite_database

TARGETS = st.sampled_from(list(AttemptState))
CATEGORIES = st.sampled_from(list(FailureCategory))


class AttemptLifecycle(RuleBasedStateMachine):
    """AttemptLifecycle drives tasks and attempts through random, replayed and illegal events."""

    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory()
        self.service = Service(sqlite_database(Path(self._dir.name) / "s.sqlite"))
        spec = spec_from_dict(
            {
                "kind": "inference",
                "name": "inf",
                "tenant": "t",
                "partitions": 2,
                "resources": {"gpus": 1},
                "output": "/o",
                "command": "c",
                "retry": {"max_attempts": 3, "backoff": 0, "on": ["node_failure", "lost", "user_error"]},
            }
        )
        self.job_id = self.service.submit(spec).job.id
        with self.service.db.session() as session:
            self.task_ids = list(session.scalars(select(Task.id).where(Task.job_id == self.job_id)))
        self.applied: list[tuple[str, AttemptState, str, str]] = []  # attempt, target, stimulus, result
        self.terminal_seen: dict[str, str] = {}
        self.counter = 0

    def teardown(self) -> None:
        """teardown closes the database and removes its directory."""
        self.service.db.dispose()
        self._dir.cleanup()

    def _stimulus(self) -> str:
        self.counter += 1
        return f"s{self.counter}"

    def _attempt_ids(self) -> list[str]:
        with self.service.db.session() as session:
            return list(session.scalars(select(Attempt.id).order_by(Attempt.created_at, Attempt.id)))

    @rule(index=st.integers(0, 1))
    def start_attempt(self, index: int) -> None:
        """start_attempt creates an attempt; it must fail when a live one exists or the task is not pending."""
        task_id = self.task_ids[index]
        with self.service.db.session() as session:
            task = session.get(Task, task_id)
            live = session.scalar(
                select(Attempt).where(
                    Attempt.task_id == task_id, Attempt.state.in_([s.value for s in LIVE_ATTEMPT_STATES])
                )
            )
            expect_ok = task is not None and task.state == TaskState.PENDING and live is None
        try:
            with self.service.db.session() as session:
                create_attempt(session, task_id, self._stimulus(), placement=[{"node": f"n{index}"}])
            assert expect_ok, "an attempt was created beside a live one or for a non-pending task"
        except (Conflict, IllegalTransition):
            assert not expect_ok

    @precondition(lambda self: bool(self._attempt_ids()))
    @rule(pick=st.integers(0, 50), to=TARGETS, category=CATEGORIES)
    def move_attempt(self, pick: int, to: AttemptState, category: FailureCategory) -> None:
        """move_attempt applies a random transition; illegal ones must raise and change nothing."""
        target = to
        ids = self._attempt_ids()
        attempt_id = ids[pick % len(ids)]
        with self.service.db.session() as session:
            current = AttemptState(session.get(Attempt, attempt_id).state)  # type: ignore[union-attr]
        stimulus = self._stimulus()
        try:
            with self.service.db.session() as session:
                result = attempt_event(session, attempt_id, target, stimulus, failure_category=category)
            assert attempt_can(current, target), f"{current}->{target} was allowed"
            self.applied.append((attempt_id, target, stimulus, result.to_state))
        except IllegalTransition:
            assert not attempt_can(current, target)

    @precondition(lambda self: bool(self.applied))
    @rule(pick=st.integers(0, 1000))
    def replay(self, pick: int) -> None:
        """replay re-applies an old stimulus: a no-op with the same result."""
        attempt_id, target, stimulus, to_state = self.applied[pick % len(self.applied)]
        with self.service.db.session() as session:
            before = session.scalar(select(func.count()).select_from(Transition))
            result = attempt_event(session, attempt_id, target, stimulus)
            after = session.scalar(select(func.count()).select_from(Transition))
        assert not result.applied and result.to_state == to_state
        assert before == after

    @rule()
    def cancel(self) -> None:
        """cancel the job (idempotent)."""
        self.service.cancel(self.job_id)

    @rule()
    def retry(self) -> None:
        """retry the job's failed or cancelled tasks."""
        try:
            self.service.retry(self.job_id)
        except InvalidRequest:
            pass

    @invariant()
    def one_live_attempt_and_increasing_tokens(self) -> None:
        """At most one live attempt per task; tokens strictly increase with attempt number (I3)."""
        with self.service.db.session() as session:
            for task_id in self.task_ids:
                attempts = list(
                    session.scalars(select(Attempt).where(Attempt.task_id == task_id).order_by(Attempt.number))
                )
                live = [a for a in attempts if AttemptState(a.state) in LIVE_ATTEMPT_STATES]
                assert len(live) <= 1
                tokens = [a.fencing_token for a in attempts]
                assert tokens == sorted(set(tokens))

    @invariant()
    def task_agrees_with_attempts(self) -> None:
        """A task is scheduled/running exactly when it has a live attempt."""
        with self.service.db.session() as session:
            for task_id in self.task_ids:
                task = session.get(Task, task_id)
                assert task is not None
                live = session.scalar(
                    select(Attempt).where(
                        Attempt.task_id == task_id, Attempt.state.in_([s.value for s in LIVE_ATTEMPT_STATES])
                    )
                )
                active = TaskState(task.state) in {TaskState.SCHEDULED, TaskState.RUNNING}
                assert active == (live is not None), (task.state, live.state if live else None)
                if live is not None and AttemptState(live.state) in {AttemptState.RUNNING, AttemptState.STOPPING}:
                    assert task.state == TaskState.RUNNING

    @invariant()
    def terminal_attempts_never_change(self) -> None:
        """Once an attempt ends, its state is final."""
        with self.service.db.session() as session:
            for attempt in session.scalars(select(Attempt)):
                if AttemptState(attempt.state) not in LIVE_ATTEMPT_STATES:
                    seen = self.terminal_seen.setdefault(attempt.id, attempt.state)
                    assert seen == attempt.state


AttemptLifecycle.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAttemptLifecycle = AttemptLifecycle.TestCase

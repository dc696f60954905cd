"""The leader's view of live attempts equals a fresh read of the store, rebuilding only what changed."""

from __future__ import annotations

from datetime import timedelta

from meta.cycle.inventory.reader import held_per_node
from meta.cycle.snapshot.build import SpecCache, build_snapshot
from meta.cycle.snapshot.live_view import LiveView
from meta.model.durations import utcnow
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store.lifecycle import attempt_event
from meta.store.models import Checkpoint
from tests.runtime.support import checkpointing, evaluation, place, share, submit, training


def _both(service: Service, view: LiveView) -> tuple[set, set]:
    """_both reads the reservations through the view and afresh, as comparable sets."""
    specs = SpecCache()
    with service.db.session() as session:
        through = build_snapshot(session, (), specs, live=view).reservations
        fresh = build_snapshot(session, (), specs).reservations
    return set(through), set(fresh)


def test_the_view_equals_a_fresh_read_through_moves_checkpoints_and_ends(service: Service) -> None:
    db, view = service.db, LiveView()
    _, (ckpt_task,) = submit(service, checkpointing())
    running = place(db, ckpt_task, [share("node1", gpus=2), share("node2", gpus=2)], AttemptState.RUNNING)
    others = {}
    for state in (AttemptState.CREATED, AttemptState.LAUNCHING, AttemptState.STOPPING):
        _, (t,) = submit(service, training(f"t-{state.value}"))
        others[state] = place(db, t, [share("node3")], state)
    _, (eval_task,) = submit(service, evaluation())
    launching = place(db, eval_task, [share("node4", gpus=1)], AttemptState.LAUNCHING)

    through, fresh = _both(service, view)
    assert through == fresh and len(fresh) == 5 and view.rebuilt == 5
    assert _both(service, view)[0] == fresh and view.rebuilt == 0  # nothing changed: nothing rebuilt

    with db.session() as session:
        attempt_event(session, launching, AttemptState.RUNNING, "test:start", actor="test")
        session.add(Checkpoint(task_id=ckpt_task, attempt_id=running, fencing_token=1, step=5, path="/c/5",
                               at=utcnow() - timedelta(minutes=1)))  # fmt: skip
        attempt_event(session, others[AttemptState.STOPPING], AttemptState.CANCELLED, "test:end", actor="test")
    through, fresh = _both(service, view)
    assert through == fresh and len(fresh) == 4 and view.rebuilt == 2  # the started one, the checkpointed one
    with db.session() as session:
        assert view.held_per_node() == held_per_node(session)  # running and stopping only
    assert set(view.held_per_node()) == {"node1", "node2", "node4"}

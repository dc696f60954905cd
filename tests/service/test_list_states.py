"""list --state filters in SQL for pending and running: the same jobs the fold of task states names."""

from __future__ import annotations

from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from tests.runtime.support import evaluation, inference, place, share, submit


def test_every_state_filter_matches_the_folded_state(service: Service) -> None:
    _, (waiting,) = submit(service, evaluation("waiting"))
    _, (running,) = submit(service, evaluation("running"))
    place(service.db, running, [share("node1")], AttemptState.RUNNING)
    _, mixed = submit(service, inference("/tmp/list-mixed", "mixed"))  # one partition live, one waiting
    place(service.db, mixed[0], [share("node1")], AttemptState.LAUNCHING)
    cancelled, _ = submit(service, evaluation("cancelled"))
    service.cancel(cancelled)
    cancelling, (live,) = submit(service, evaluation("cancelling"))
    place(service.db, live, [share("node1")], AttemptState.RUNNING)
    service.cancel(cancelling)
    done, (finished,) = submit(service, evaluation("done"))
    place(service.db, finished, [share("node1")], AttemptState.SUCCEEDED)
    everything = service.list_jobs()
    assert {j.state for j in everything} >= {"pending", "running", "cancelled", "cancelling", "succeeded"}
    for state in JobState:
        want = [j.name for j in everything if j.state == state.value]
        assert [j.name for j in service.list_jobs(state=state)] == want, state
    assert [j.name for j in service.list_jobs(state=JobState.RUNNING, limit=1)] == ["mixed"]  # the newest running

"""The orphan sweep (meta/cycle/reconcile/orphans.py) and the screen before it (observe.py): what each looks at again."""

from __future__ import annotations

from types import SimpleNamespace

from meta.cycle.reconcile.listed import Sighting
from meta.cycle.reconcile.observe import Observation
from meta.cycle.reconcile.orphans import cancel_orphans
from meta.cycle.reconcile.settings import ReconcileResult
from meta.model.durations import utcnow
from slurm_bridge.states import map_state


def _seen(job: str, state: str) -> list[Sighting]:
    return [Sighting(job, map_state(state, 0), ("n1",), "squeue")]


def _sweep(squeue: dict[str, list[Sighting]], live: set[str], later: set[str]) -> tuple[list[str], int]:
    """_sweep runs the sweep; returns the jobs cancelled and how often the live attempts were read again."""
    reads: list[int] = []

    def still_live() -> set[str]:
        reads.append(1)
        return later

    cancelled: list[str] = []
    result = ReconcileResult()
    cancel_orphans(Observation(at=utcnow(), squeue=squeue), live, still_live, result, cancelled.append)
    assert cancelled == result.orphans_cancelled
    return cancelled, len(reads)


def test_ended_jobs_of_ended_attempts_need_no_second_read_of_the_live_attempts() -> None:
    squeue = {"live": _seen("1", "RUNNING"), "done": _seen("2", "COMPLETED"), "failed": _seen("3", "FAILED")}
    assert _sweep(squeue, {"live"}, set()) == ([], 0)


def test_an_attempt_that_went_live_meanwhile_is_no_orphan_but_one_live_neither_time_is() -> None:
    squeue = {"launched": _seen("4", "RUNNING"), "orphan": _seen("5", "PENDING"), "done": _seen("6", "COMPLETED")}
    assert _sweep(squeue, set(), {"launched"}) == (["5"], 1)
    assert _sweep(squeue, set(), {"launched", "orphan"}) == ([], 1)


class _Claims:
    """_Claims owns every job but ``spoof``'s and counts which attempts it was asked about."""

    def __init__(self, claims: set[str]) -> None:
        self.claims = claims
        self.asked: list[str] = []

    def of(self, attempt_id: str):  # noqa: ANN201 - a Claim's stand-in
        self.asked.append(attempt_id)
        return SimpleNamespace(owns=lambda job, _uid, _user: job != "spoof")

    def stored(self, _attempt_id: str) -> bool:
        return True


def test_sightings_are_screened_once_per_index_and_sacct_after_squeue_still_is() -> None:
    observation = Observation(at=utcnow(), squeue={"live": _seen("1", "RUNNING"), "other": _seen("2", "RUNNING")})
    live = _Claims({"live"})
    observation.screen(live, only=live.claims)  # the reconciler: live attempts' squeue rows, before sacct
    observation.sacct = {"live": _seen("spoof", "COMPLETED")}  # read later: its rows were never screened
    every = _Claims({"live", "other"})
    observation.screen(every)
    assert live.asked == ["live"] and sorted(every.asked) == ["live", "other"]  # "live" again for its sacct row only
    assert "live" not in observation.sacct and ("live", "spoof") in observation.spoofed
    assert set(observation.squeue) == {"live", "other"}

"""Grouping by attempt and folding het-job components."""

import pytest

from slurm_bridge.attempt_outcome import by_attempt, combined
from slurm_bridge.parse.squeue import parse_squeue_json
from slurm_bridge.states import Outcome, map_state


def test_by_attempt_on_captured_squeue(captured):
    groups = by_attempt(parse_squeue_json(captured("squeue.json").read_text()))
    gang = groups["00000000-0000-4000-8000-00000000gang"]
    assert {job.name for job in gang} == {"ms-gang-a100"}
    assert all(job.tag is not None for jobs in groups.values() for job in jobs)


@pytest.mark.parametrize(
    ("states", "want"),
    [
        (["RUNNING", "RUNNING"], Outcome.RUNNING),
        (["PENDING", "RUNNING"], Outcome.RUNNING),
        (["COMPLETED", "RUNNING"], Outcome.RUNNING),
        (["COMPLETED", "COMPLETED"], Outcome.SUCCEEDED),
        (["CANCELLED", "FAILED"], Outcome.FAILED),
        (["COMPLETED", "OUT_OF_MEMORY"], Outcome.OOM),
        (["TIMEOUT", "CANCELLED"], Outcome.TIMEOUT),
    ],
)
def test_combined(states, want):
    assert combined([map_state(state, 1 if state == "FAILED" else 0) for state in states]).outcome == want


def test_combined_needs_components():
    with pytest.raises(ValueError):
        combined([])

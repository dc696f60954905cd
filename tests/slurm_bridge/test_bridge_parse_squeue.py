"""squeue --json parsing on the captured dev-cluster output and the reference sample."""

import json

import pytest

from slurm_bridge.errors import SlurmParseError, SlurmTransient
from slurm_bridge.parse.squeue import metasched_jobs, parse_squeue_json
from slurm_bridge.states import FailureCategory, Outcome
from tests.slurm_bridge.conftest import jobs_by_name


@pytest.fixture
def jobs(captured):
    """jobs maps job name to its squeue entries in job-id order."""
    return jobs_by_name(parse_squeue_json(captured("squeue.json").read_text()))


def test_exit_three_is_a_user_error(jobs):
    job = jobs["exit-three"][-1]
    assert job.raw_exit_status == 768
    assert (job.exit_code, job.signal) == (3, None)
    assert job.observed.outcome == Outcome.FAILED
    assert job.observed.category == FailureCategory.USER_ERROR
    assert job.state_reason == "NonZeroExitCode"


def test_running_gang_has_nodes_gres_and_tag(jobs):
    job = jobs["ms-gang-a100"][-1]
    assert job.observed.outcome == Outcome.RUNNING
    assert job.nodes == ("a100n1", "a100n2")
    assert (job.tres_per_node[0].type, job.tres_per_node[0].count) == ("a100", 8)
    assert job.tres_alloc.gpus_by_type == {"a100": 16}
    assert [g.indices for g in job.gres_detail] == [tuple(range(8)), tuple(range(8))]
    assert job.tag.attempt_id == "00000000-0000-4000-8000-00000000gang"
    assert job.tag.fencing_token == 7
    assert job.account == "tenant-a"
    assert job.start_time is not None and job.submit_time is not None


def test_het_job_components_share_het_job_id(jobs):
    first, second = jobs["ms-het-trainer"][-2:]
    assert first.het_job_id == second.het_job_id == first.job_id
    assert (first.het_job_offset, second.het_job_offset) == (0, 1)
    assert first.tres_per_node[0].type == "h100" and second.tres_per_node[0].type == "t4"
    assert jobs["exit-three"][-1].het_job_id is None


def test_pending_jobs_and_reasons(jobs):
    pending = jobs["ms-pending-a100"][-1]
    assert pending.observed.outcome == Outcome.PENDING and pending.nodes == ()
    assert jobs["after-gang"][-1].state_reason == "Dependency"


def test_reservation_name(jobs):
    assert jobs["in-reservation"][-1].reservation == "ms-resv-now"
    assert jobs["exit-three"][-1].reservation is None


def test_metasched_filter_uses_comment_tag(jobs):
    every = [job for entries in jobs.values() for job in entries]
    tagged = {job.name for job in metasched_jobs(every) if job.tag.fencing_token is not None}
    assert {"ms-gang-a100", "ms-3f2a9c1e-attempt-1"} <= tagged  # other ms-* jobs may share the queue
    assert "exit-three" not in tagged
    assert jobs["ms-3f2a9c1e-attempt-1"][-1].tag.fencing_token == 42


def test_reference_sample(reference):
    jobs = {job.job_id: job for job in parse_squeue_json(reference("squeue.json").read_text())}
    assert jobs[12].exit_code == 3
    assert (jobs[6].state, jobs[6].exit_code, jobs[6].signal) == ("CANCELLED", None, 15)
    assert jobs[6].observed.category == FailureCategory.CANCELLED
    assert jobs[1].comment == "mjid=42"
    assert (jobs[4].het_job_id, jobs[4].het_job_offset) == (3, 1)


def test_later_openapi_shapes_are_tolerated():
    payload = {
        "jobs": [
            {
                "job_id": 7,
                "job_state": ["FAILED"],
                "exit_code": {"status": ["EXITED"], "return_code": {"set": True, "number": 2}},
                "start_time": {"set": True, "number": 1796231532},
            }
        ]
    }
    (job,) = parse_squeue_json(json.dumps(payload))
    assert job.state == "FAILED" and job.exit_code == 2 and job.start_time is not None
    assert job.nodes == () and job.name == ""


@pytest.mark.parametrize(
    "garbage",
    ["not json", "[]", '{"jobs": "x"}', '{"jobs": [{"name": "no id"}]}'],
)
def test_garbage_raises(garbage):
    with pytest.raises(SlurmParseError):
        parse_squeue_json(garbage)


def test_controller_down_is_transient_not_empty(reference):
    # 22.05 exits 0 with "jobs": [] and an errors entry when slurmctld cannot be reached.
    with pytest.raises(SlurmTransient, match="Failed while looking for jobs"):
        parse_squeue_json(reference("squeue-controller-down.json").read_text())

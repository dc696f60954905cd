"""squeue --Format text parsing (the daemon's read) on output captured from the dev cluster."""

import pytest

from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.squeue import FIELD_END, SQUEUE_FIELDS, parse_squeue_text, squeue_format_args
from slurm_bridge.states import FailureCategory, Outcome
from tests.slurm_bridge.conftest import jobs_by_name


@pytest.fixture
def jobs(captured):
    """jobs maps job name to its squeue entries in job-id order."""
    return jobs_by_name(parse_squeue_text(captured("squeue.txt").read_text()))


def test_every_captured_line_is_a_job(captured):
    lines = [line for line in captured("squeue.txt").read_text().splitlines() if line.strip()]
    assert len(parse_squeue_text("\n".join(lines))) == len(lines) == 11


def test_exit_three_is_a_user_error(jobs):
    (job,) = jobs["exit-three"]
    assert (job.raw_exit_status, job.exit_code, job.signal) == (768, 3, None)
    assert job.observed.outcome == Outcome.FAILED and job.observed.category == FailureCategory.USER_ERROR
    assert job.nodes == ("h100n1",) and job.state_reason == "NonZeroExitCode"


def test_running_gang_has_nodes_tres_and_tag(jobs):
    (job,) = jobs["ms-gang-a100"]
    assert job.state == "RUNNING" and job.nodes == ("a100n1", "a100n2")
    assert job.tres_alloc.gpus_by_type == {"a100": 16}
    assert job.tag is not None and job.tag.fencing_token == 7
    assert job.start_time is not None and job.end_time is not None and job.start_time < job.end_time


def test_het_components_share_the_leader_id(jobs):
    components = jobs["ms-het-trainer"]
    assert [(j.het_job_id, j.het_job_offset) for j in components] == [(components[0].job_id, 0), (components[0].job_id, 1)]
    assert {j.nodes for j in components} == {("h100n1",), ("t4n1",)}


def test_pending_jobs_have_a_reason_and_no_nodes(jobs):
    assert [(j.state, j.state_reason, j.nodes) for j in jobs["ms-pending-a100"]] == [("PENDING", "Resources", ())]
    (dependent,) = jobs["after-gang"]
    assert dependent.state_reason == "Dependency" and dependent.end_time is None  # no end time: "NONE"


def test_reservation_and_accounts(jobs):
    (job,) = jobs["in-reservation"]
    assert job.reservation == "ms-resv-now" and job.account == "prod"
    assert jobs["exit-three"][0].reservation is None


def _line(**fields: str) -> str:
    values = {name: "N/A" for name in SQUEUE_FIELDS} | {"JobID": "7", "State": "RUNNING", "Exit_Code": "0"}
    values.update(fields)
    return "".join(values[name] + FIELD_END for name in SQUEUE_FIELDS)


def test_names_and_comments_keep_separators_and_a_bad_line_is_skipped():
    good = _line(Name="a|b c,d", Comment="x|y,z", ArrayJobID="5", ArrayTaskID="2")
    (job,) = parse_squeue_text("\n".join([good, "garbage\x1fline", _line(JobID="not-a-number")]))
    assert (job.name, job.comment, job.array_job_id, job.array_task_id) == ("a|b c,d", "x|y,z", 5, 2)


def test_a_signal_and_a_plain_job_outside_an_array():
    (job,) = parse_squeue_text(_line(State="FAILED", Exit_Code="9", ArrayJobID="7"))
    assert (job.exit_code, job.signal, job.array_job_id, job.array_task_id) == (None, 9, None, None)


def test_output_of_which_no_line_is_a_job_raises(captured):
    with pytest.raises(SlurmParseError):
        parse_squeue_text(captured("squeue.json").read_text())
    assert parse_squeue_text("") == []  # an empty queue is an empty list


def test_the_format_argument_names_every_field_once():
    (argument,) = [a for a in squeue_format_args() if a.startswith("--Format=")]
    names = [field.split(":", 1)[0] for field in argument.removeprefix("--Format=").split(",")]
    assert names == list(SQUEUE_FIELDS) and "--states=all" in squeue_format_args()

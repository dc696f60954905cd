"""sacct -P parsing: exit codes, CANCELLED by, het ids, reservations, steps, garbage."""

import pytest

from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.sacct import SACCT_FIELDS, parse_sacct
from slurm_bridge.states import FailureCategory, Outcome

# The reference sample was captured with a different field list.
REFERENCE_FIELDS = (
    "JobID,JobName,Comment,State,ExitCode,Account,QOS,Partition,Reservation,ReservationId,"
    "AllocTRES,NodeList,Submit,Start,End"
).split(",")


@pytest.fixture
def records(captured):
    """records maps job name to its sacct rows (job ids change whenever fixtures are re-captured)."""
    by_name = {}
    for record in parse_sacct(captured("sacct.txt").read_text()):
        by_name.setdefault(record.name, []).append(record)
    return by_name


def test_exit_three_is_failed_user_error(records):
    record = records["exit-three"][-1]
    assert (record.state, record.exit_code, record.signal) == ("FAILED", 3, None)
    assert record.observed.outcome == Outcome.FAILED
    assert record.observed.category == FailureCategory.USER_ERROR


def test_timeout(records):
    record = records["timeout-t4"][-1]
    assert record.observed.outcome == Outcome.TIMEOUT
    assert record.observed.category == FailureCategory.TIMEOUT
    assert record.elapsed_s >= 60


def test_cancelled_by_uid_and_never_started(records):
    record = records["cancel-while-pending"][-1]
    assert record.state == "CANCELLED" and record.state_by_uid == 0
    assert record.nodes == () and record.start is None and record.end is not None
    assert record.observed.category == FailureCategory.CANCELLED


def test_het_components(records):
    first, second = sorted(records["ms-het-trainer"][-2:], key=lambda r: r.het_offset)
    assert first.base_job_id == second.base_job_id
    assert first.job_id == f"{first.base_job_id}+0" and second.het_offset == 1
    assert second.alloc_tres.gpus_by_type == {"t4": 1}
    assert first.step is None


def test_reservation_and_tres(records):
    assert records["in-reservation"][-1].reservation == "ms-resv-now"
    assert records["exit-three"][-1].reservation is None
    gang = records["ms-gang-a100"][-1]
    assert gang.alloc_tres.gpus == 16 and gang.alloc_tres.memory_mib == 4000
    assert gang.nodes == ("a100n1", "a100n2")
    assert gang.tag.attempt_id == "00000000-0000-4000-8000-00000000gang"
    assert gang.tag.fencing_token == 7
    assert gang.account == "tenant-a"
    assert gang.observed.outcome == Outcome.SUCCEEDED


def test_reference_sample_with_steps(reference):
    records = {
        r.job_id: r for r in parse_sacct(reference("sacct-parsable.txt").read_text(), REFERENCE_FIELDS)
    }
    assert records["12"].exit_code == 3
    assert records["6.batch"].step == "batch" and records["6.batch"].signal == 15
    assert records["2.0"].step == "0"
    assert records["3+1.0"].het_offset == 1


def test_header_line_is_used_when_present():
    text = "JobID|State|ExitCode\n42_7|OUT_OF_MEMORY|0:125\n"
    (record,) = parse_sacct(text)
    assert record.array_task_id == 7 and record.base_job_id == 42
    assert record.observed.outcome == Outcome.OOM


def test_pipe_in_comment_is_recovered():
    line = "5|name|a|b|COMPLETED|0:0||cpu=1|n1|acct|None|None|00:00:01|0:0|2001"
    (record,) = parse_sacct(line)
    assert record.comment == "a|b" and record.state == "COMPLETED" and record.uid == 2001


@pytest.mark.parametrize(
    "garbage", ["x|y", "abc|n||COMPLETED|0:0||||a|||00:00:00", "1|n||FAILED|x:y||||a|||"]
)
def test_garbage_raises_when_strict(garbage):
    with pytest.raises(SlurmParseError):
        parse_sacct(garbage)


def test_lenient_mode_skips_bad_lines():
    good = "7|n||COMPLETED|0:0||cpu=1|n1|a|None|None|00:00:00|0:0"
    records = parse_sacct(f"garbage\n{good}\n", SACCT_FIELDS, strict=False)
    assert [r.job_id for r in records] == ["7"]


# Captured on the dev cluster (22.05): the job's ExitCode shows 128+N as "N:0"; squeue keeps 138.
SIGNAL_ENDS = """\
403|ms-srun||FAILED|10:0||cpu=1|a100n1|tenant-a|None|None|00:00:57|0:10
409|ms-shell||FAILED|0:10||cpu=1|a100n1|tenant-a|None|None|00:00:57|0:0
411|exit-138||FAILED|10:0||cpu=1|a100n1|tenant-a|None|None|00:00:00|0:0
"""


def test_an_exit_code_above_128_is_restored_when_a_step_tells_which_signal():
    records = {r.name: r for r in parse_sacct(SIGNAL_ENDS)}
    # srun exited 128+USR1 because its task died of USR1 (DerivedExitCode 0:10)
    assert (records["ms-srun"].exit_code, records["ms-srun"].signal) == (138, None)
    # the batch shell itself killed by USR1
    assert (records["ms-shell"].exit_code, records["ms-shell"].signal) == (0, 10)
    # "exit 138" without a killed step cannot be told from "exit 10": left as sacct shows it
    assert records["exit-138"].exit_code == 10


def test_lines_captured_before_derived_exit_code_still_parse():
    (record,) = parse_sacct("7|n||FAILED|3:0||cpu=1|n1|a|None|None|00:00:00")
    assert record.exit_code == 3 and record.uid is None  # nor UID (added for issue 22)

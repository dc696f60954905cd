"""CliSlurmClient against fake binaries: argv shapes, parsing, idempotent cancel and delete."""

from datetime import UTC, datetime

import pytest

from slurm_bridge.call_records import CallOutcome
from slurm_bridge.commands import CliSlurmClient, parse_job_id
from slurm_bridge.errors import SlurmParseError, SlurmRejected, SlurmTransient
from slurm_bridge.parse.squeue import squeue_format_args
from slurm_bridge.reservations import ReservationSpec
from slurm_bridge.runner import CommandRunner


def client_with(**binaries) -> CliSlurmClient:
    return CliSlurmClient(CommandRunner(binaries=binaries))


def test_submit_pipes_script_to_sbatch_parsable(fake_binary, recorded_calls):
    client = client_with(sbatch=fake_binary(stdout="4242\n"))
    assert client.submit("#!/bin/bash\necho hi\n") == 4242
    (call,) = recorded_calls()
    assert call["argv"] == ["--parsable"] and call["stdin"] == "#!/bin/bash\necho hi\n"


@pytest.mark.parametrize(("output", "job_id"), [("17\n", 17), ("17;emu\n", 17), ("warning\n18\n", 18)])
def test_parse_job_id(output, job_id):
    assert parse_job_id(output) == job_id


@pytest.mark.parametrize("output", ["", "Submitted batch job 3", "abc"])
def test_parse_job_id_garbage(output):
    with pytest.raises(SlurmParseError):
        parse_job_id(output)


def test_cancel_with_signal(fake_binary, recorded_calls):
    client = client_with(scancel=fake_binary())
    client.cancel([12, "20+1"], signal="USR1")
    client.cancel([])
    assert [c["argv"] for c in recorded_calls()] == [["--signal=USR1", "--batch", "12", "20+1"]]


def test_cancel_of_finished_job_is_not_an_error(fake_binary):
    stderr = "scancel: error: Kill job error on job id 12: Job/step already completing or completed\n"
    client_with(scancel=fake_binary(stderr=stderr, exit_code=1)).cancel([12])


def test_cancel_mixed_errors_still_raise(fake_binary):
    stderr = (
        "scancel: error: Kill job error on job id 12: Job/step already completing or completed\n"
        "scancel: error: Kill job error on job id 13: Access/permission denied\n"
    )
    with pytest.raises(SlurmRejected):
        client_with(scancel=fake_binary(stderr=stderr, exit_code=1)).cancel([12, 13])


def test_cancel_rejects_non_ids():
    with pytest.raises(ValueError):
        client_with().cancel(["12; rm -rf /"])


def test_cancel_other_rejection_raises(fake_binary):
    client = client_with(
        scancel=fake_binary(stderr="scancel: error: Access/permission denied\n", exit_code=1)
    )
    with pytest.raises(SlurmRejected):
        client.cancel([12])


def test_reads_parse_fixtures(fake_binary, captured, recorded_calls):
    client = client_with(
        squeue=fake_binary(stdout=captured("squeue.txt").read_text(), name="squeue"),
        sinfo=fake_binary(stdout=captured("sinfo.json").read_text(), name="sinfo"),
        sacct=fake_binary(stdout=captured("sacct.txt").read_text(), name="sacct"),
        sdiag=fake_binary(stdout=captured("sdiag.txt").read_text(), name="sdiag"),
    )
    assert any(job.name == "exit-three" for job in client.squeue())
    assert len(client.sinfo()) == 6
    assert client.sdiag().server_thread_count >= 1
    since = datetime(2026, 12, 2, 17, 0, tzinfo=UTC)
    assert any(r.exit_code == 3 for r in client.sacct(since, since.replace(hour=18)))
    assert recorded_calls("squeue")[0]["argv"] == squeue_format_args()
    sacct_argv = recorded_calls("sacct")[0]["argv"]
    assert sacct_argv[:5] == ["-a", "-n", "-P", "-X", "-o"]
    assert sacct_argv[5].startswith("JobID,JobName,Comment,State,ExitCode")
    assert "-S" in sacct_argv and "-E" in sacct_argv


def test_scontrol_reads(fake_binary, captured, recorded_calls):
    client = client_with(scontrol=fake_binary(stdout=captured("scontrol-show-node.txt").read_text()))
    assert {n.name for n in client.show_nodes()} >= {"a100n1", "t4n2"}
    assert recorded_calls()[0]["argv"] == ["-o", "show", "node"]


def test_create_update_delete_reservation(fake_binary, recorded_calls):
    client = client_with(scontrol=fake_binary(stdout="Reservation created: ms-hold-t1\n"))
    spec = ReservationSpec("ms-hold-t1", ("a100n1", "a100n2"), duration_s=3600)
    assert client.create_reservation(spec) == "ms-hold-t1"
    client.update_reservation(spec)
    client.delete_reservation("ms-hold-t1")
    create, update, delete = (c["argv"] for c in recorded_calls())
    assert create == [
        "create",
        "reservation",
        "ReservationName=ms-hold-t1",
        "Nodes=a100n[1-2]",
        "StartTime=now",
        "Duration=60",
        "Users=root",
        "Flags=IGNORE_JOBS",
    ]
    assert update[:3] == ["update", "ReservationName=ms-hold-t1", "Nodes=a100n[1-2]"]
    assert delete == ["delete", "ReservationName=ms-hold-t1"]


def test_delete_absent_reservation_is_fine(fake_binary):
    stderr = "Error deleting the reservation: Invalid reservation name\n"
    client_with(scontrol=fake_binary(stderr=stderr, exit_code=1)).delete_reservation("ms-hold-gone")


def test_controller_down_squeue_is_reported_as_transient(fake_binary):
    # what 22.05's squeue prints with slurmctld down (the live suite checks the real one)
    down = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    client = client_with(squeue=fake_binary(stderr=down, exit_code=1))
    with pytest.raises(SlurmTransient):
        client.squeue()
    assert client.runner.counter.outcomes("squeue", CallOutcome.TRANSIENT) == 1
    assert client.runner.counter.outcomes("squeue", CallOutcome.OK) == 0

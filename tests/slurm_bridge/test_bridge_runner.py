"""CommandRunner: argv only, timeouts, typed failure classification, observer and counters."""

import json
import sys
from pathlib import Path

import pytest

from slurm_bridge.call_records import CallOutcome, RecordingObserver
from slurm_bridge.classify import classify_message
from slurm_bridge.errors import SlurmFailed, SlurmRejected, SlurmTransient, SlurmUnknownOutcome
from slurm_bridge.runner import CommandRunner, clean_env


def sh(script: str) -> list[str]:
    """sh is a fake Slurm binary: a tiny shell program (the runner itself never uses a shell)."""
    return ["sh", "-c", script, "fake"]


def test_success_returns_output_and_counts():
    observer = RecordingObserver()
    runner = CommandRunner(binaries={"squeue": sh("echo hello")}, observer=observer)
    result = runner.run("squeue", ["--json"])
    assert result.stdout == "hello\n" and result.returncode == 0
    assert runner.counter.calls("squeue") == 1
    (record,) = observer.records
    assert record.command == "squeue" and record.outcome == CallOutcome.OK and record.latency_s >= 0
    assert record.argv[-1] == "--json"


@pytest.mark.parametrize(
    ("stderr", "error_type", "outcome"),
    [
        (
            "sbatch: error: Invalid account or account/partition combination specified",
            SlurmRejected,
            "rejected",
        ),
        (
            "sbatch: error: Batch job submission failed: Requested node configuration is not available",
            SlurmRejected,
            "rejected",
        ),
        ("sbatch: unrecognized option '--bogus'", SlurmRejected, "rejected"),
        ("sbatch: error: Batch job submission failed: Invalid qos specification", SlurmRejected, "rejected"),
        (
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
            SlurmTransient,
            "transient",
        ),
        (
            "sbatch: error: Batch job submission failed: Resource temporarily unavailable",
            SlurmTransient,
            "transient",
        ),
        (
            "sbatch: error: slurm_persist_conn_open_without_init: failed to open persistent connection to host:"
            "localhost:6819: Connection refused",
            SlurmTransient,
            "transient",
        ),
        (
            "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
            SlurmUnknownOutcome,
            "unknown",
        ),
        ("sbatch: error: something nobody has seen before", SlurmFailed, "failed"),
    ],
)
def test_sbatch_failures_are_classified(stderr, error_type, outcome):
    runner = CommandRunner(binaries={"sbatch": sh(f"echo '{stderr}' >&2; exit 1")})
    with pytest.raises(error_type) as caught:
        runner.run("sbatch", ["--parsable"], stdin="#!/bin/bash\ntrue\n", mutating=True)
    assert caught.value.returncode == 1 and caught.value.command == "sbatch"
    assert runner.counter.outcomes("sbatch", CallOutcome(outcome)) == 1


def test_lost_reply_on_a_read_is_transient():
    assert (
        classify_message("Socket timed out on send/recv operation", mutating=False) == CallOutcome.TRANSIENT
    )
    assert classify_message("Socket timed out on send/recv operation", mutating=True) == CallOutcome.UNKNOWN


def test_slurmdbd_down_is_transient():
    message = "sacct: error: Problem talking to the database: Connection refused"
    assert classify_message(message, mutating=False) == CallOutcome.TRANSIENT


def test_timeout_of_a_write_is_unknown_outcome():
    observer = RecordingObserver()
    runner = CommandRunner(binaries={"sbatch": ["sleep", "5"]}, observer=observer)
    with pytest.raises(SlurmUnknownOutcome, match="timed out"):
        runner.run("sbatch", [], timeout_s=0.2, mutating=True)
    assert observer.records[0].outcome == CallOutcome.UNKNOWN


def test_timeout_of_a_read_is_transient():
    runner = CommandRunner(binaries={"squeue": sh("sleep 5")})
    with pytest.raises(SlurmTransient):
        runner.run("squeue", ["--json"], timeout_s=0.2)


def test_timeout_kills_grandchildren():
    # The fake's child would keep stdout open for 5 s if only the direct child were killed.
    runner = CommandRunner(binaries={"scancel": sh("sleep 5; echo late")})
    with pytest.raises(SlurmUnknownOutcome):
        runner.run("scancel", ["1"], timeout_s=0.2, mutating=True)


def test_death_by_signal_of_a_write_is_unknown_outcome():
    runner = CommandRunner(binaries={"sbatch": sh("kill -9 $$")})
    with pytest.raises(SlurmUnknownOutcome, match="signal 9"):
        runner.run("sbatch", [], mutating=True)


def test_missing_binary_is_a_plain_failure():
    runner = CommandRunner(bin_dir="/nonexistent/slurm/bin")
    with pytest.raises(SlurmFailed, match="cannot run sbatch"):
        runner.run("sbatch", [], mutating=True)
    assert runner.argv_for("sbatch", ["-x"]) == ["/nonexistent/slurm/bin/sbatch", "-x"]


def test_user_strings_stay_single_argv_elements(tmp_path):
    # A fake binary that prints its argv: shell metacharacters must arrive untouched.
    printer = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]
    runner = CommandRunner(binaries={"scontrol": printer})
    nasty = "x; rm -rf / && echo $(whoami) `id` | cat > /tmp/pwned"
    result = runner.run("scontrol", ["show", nasty])
    assert json.loads(result.stdout) == ["show", nasty]
    assert not (tmp_path / "pwned").exists()


def test_stdin_reaches_the_command():
    runner = CommandRunner(binaries={"sbatch": ["cat"]})
    assert (
        runner.run("sbatch", [], stdin="#!/bin/bash\necho hi\n", mutating=True).stdout
        == "#!/bin/bash\necho hi\n"
    )


def test_clean_env_drops_output_changing_variables():
    env = clean_env(
        {"SQUEUE_FORMAT": "%i", "SBATCH_ACCOUNT": "x", "SLURM_CONF": "/etc/slurm/slurm.conf", "PATH": "/bin"}
    )
    assert env == {"SLURM_CONF": "/etc/slurm/slurm.conf", "PATH": "/bin"}


def test_runner_passes_clean_env():
    runner = CommandRunner(
        binaries={"squeue": sh('echo "${SQUEUE_FORMAT:-unset}"')},
        env={"SQUEUE_FORMAT": "%i", "PATH": "/usr/bin:/bin"},
    )
    assert runner.run("squeue", []).stdout.strip() == "unset"


# Real stderr of Slurm 22.05.8 on the dev cluster (sbatch/scontrol with bad arguments).
REAL_REJECTIONS = [
    "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
    "sbatch: error: Batch job submission failed: Invalid qos specification",
    "sbatch: error: invalid partition specified: nope\n"
    "sbatch: error: Batch job submission failed: Invalid partition name specified",
    "sbatch: unrecognized option '--bogus'\nTry \"sbatch --help\" for more information",
    "sbatch: error: Batch job submission failed: Requested node configuration is not available",
    "sbatch: error: Batch job submission failed: Invalid node name specified",
    "sbatch: error: Batch job submission failed: Requested reservation is invalid",
    "sbatch: error: Invalid --time specification",
    "sbatch: error: Memory specification can not be satisfied\n"
    "sbatch: error: Batch job submission failed: Requested node configuration is not available",
    "scancel: error: Invalid job id abc",
    "Error updating the reservation: Requested reservation is invalid\n"
    "slurm_update error: Requested reservation is invalid",
    "Error creating the reservation: Invalid node name specified",
    "Error updating the reservation: Reservation already started",
    "delete_reservation ReservationName=ms-hold-busy: Requested reservation is in use",
]


@pytest.mark.parametrize("message", REAL_REJECTIONS)
def test_real_rejections(message):
    assert classify_message(message, mutating=True) == CallOutcome.REJECTED


def test_no_shell_anywhere_in_slurm_bridge():
    # Every Slurm call goes through CommandRunner with an argv list; nothing may reach a shell.
    source = Path(__file__).resolve().parents[2] / "slurm_bridge"
    for path in source.rglob("*.py"):
        text = path.read_text()
        for forbidden in ("shell=True", "os.system(", "os.popen(", "getoutput("):
            assert forbidden not in text, f"{forbidden} in {path}"


def test_a_runner_for_one_cluster_asks_it_with_minus_m():
    runner = CommandRunner(cluster="dev2")
    assert runner.argv_for("squeue", ["--noheader"]) == ["squeue", "--clusters=dev2", "--noheader"]
    assert runner.argv_for("scontrol", ["show", "node"]) == ["scontrol", "--clusters=dev2", "show", "node"]
    # slurmdbd serves every cluster: sacctmgr takes no -M
    assert runner.argv_for("sacctmgr", ["-n", "show", "qos"]) == ["sacctmgr", "-n", "show", "qos"]
    assert CommandRunner().argv_for("squeue", []) == ["squeue"]


def test_slurmdbds_registered_clusters_are_those_whose_controller_registered():
    from slurm_bridge.errors import SlurmParseError
    from slurm_bridge.parse.sacctmgr import parse_registered_clusters

    # sacctmgr -n -P show clusters format=Cluster,ControlHost,ControlPort on the dev pair, plus one never started
    text = "dev2|127.0.0.1|6827\nemu|127.0.0.1|6817\nnew|| 0\n"
    assert parse_registered_clusters(text) == ["dev2", "emu"]
    with pytest.raises(SlurmParseError, match="not a cluster line"):
        parse_registered_clusters("a b|x|1\n")
    with pytest.raises(SlurmParseError, match="at most 64"):
        parse_registered_clusters("".join(f"c{i}|h|1\n" for i in range(65)))

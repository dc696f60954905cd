"""metasched status: where each attempt wrote stdout and stderr (cli.log_paths)."""

from __future__ import annotations

from cli.log_paths import attempt_logs

STATUS = {"name": "train.sh", "owner": "alice", "submit_dir": "/home/alice/p", "spec": {"sbatch": {}}}
ATTEMPT = {"slurm_job_id": "3118", "nodes": ["a100n2"], "number": 1}


def test_sbatchs_default_is_slurm_id_out_in_the_submit_folder() -> None:
    assert attempt_logs(STATUS, ATTEMPT) == ("/home/alice/p/slurm-3118.out",) * 2


def test_patterns_are_expanded_with_each_attempts_own_values() -> None:
    status = {**STATUS, "spec": {"sbatch": {"chdir": "/scratch/a", "output": "logs/%x-%j-%u-%N-%%.out",
                                            "error": "/abs/%A.err"}}}  # fmt: skip
    assert attempt_logs(status, ATTEMPT) == ("/scratch/a/logs/train.sh-3118-alice-a100n2-%.out", "/abs/3118.err")
    assert attempt_logs(status, {**ATTEMPT, "slurm_job_id": "3200"})[1] == "/abs/3200.err"


def test_unknown_until_launched_or_for_the_daemons_own_jobs() -> None:
    assert attempt_logs(STATUS, {**ATTEMPT, "slurm_job_id": None}) == ("-", "-")
    assert attempt_logs({**STATUS, "owner": None}, ATTEMPT) == ("-", "-")


def test_the_daemons_own_jobs_log_in_its_log_folder() -> None:
    """Root's job under root's serve runs as the daemon: its output is ``<serve --log-dir>/<job>/<attempt>.out``."""
    status = {**STATUS, "short_id": "j7", "owner": "root", "runs_as_daemon": True, "log_dir": "/var/lib/qs/logs/"}
    attempt = {**ATTEMPT, "id": "a-1"}
    assert attempt_logs(status, attempt) == ("/var/lib/qs/logs/j7/a-1.out",) * 2
    assert attempt_logs({**status, "log_dir": None}, attempt) == ("-", "-")  # local mode: the folder is unknown
    # a job run as its user keeps sbatch's default in its submit folder
    assert attempt_logs({**status, "runs_as_daemon": False}, attempt) == ("/home/alice/p/slurm-3118.out",) * 2

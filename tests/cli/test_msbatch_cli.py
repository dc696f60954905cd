"""End-to-end tests of the ``msbatch`` command against a temporary SQLite database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.sbatch.msbatch import main
from meta.service.api import Service

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "msbatch"
TRAINING = GOLDEN / "ddp_2node_a100.sh"


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """db_url is a fresh SQLite file, made the default through METASCHED_DB; SBATCH_* are cleared."""
    url = f"sqlite:///{tmp_path / 'msbatch.sqlite'}"
    monkeypatch.setenv("METASCHED_DB", url)
    monkeypatch.delenv("METASCHED_TENANT", raising=False)
    for variable in (
        "SBATCH_ACCOUNT",
        "SBATCH_JOB_NAME",
        "SBATCH_PARTITION",
        "SBATCH_QOS",
        "SBATCH_TIMELIMIT",
    ):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    return url


def _msbatch(*argv: str) -> Result:
    return CliRunner().invoke(main, list(argv))


def test_submit_prints_like_sbatch_and_stores_the_job(db_url: str) -> None:
    result = _msbatch(str(TRAINING))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Submitted batch job ")
    short_id = result.stdout.split()[-1]
    status = Service.open(db_url).status(short_id)
    assert status.summary.tenant == "nlp" and status.summary.kind == "training"
    assert status.spec["workers"] == 2 and status.spec["resources"]["gpu_type"] == "a100"


def test_parsable_prints_only_the_id(db_url: str) -> None:
    result = _msbatch("--parsable", "-Q", str(TRAINING))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().isalnum() and " " not in result.stdout.strip()
    assert result.stderr == ""


def test_the_same_key_twice_returns_the_same_job(db_url: str) -> None:
    first = _msbatch("--parsable", "--key", "run-42", str(TRAINING))
    second = _msbatch("--parsable", "--key", "run-42", str(TRAINING))
    assert first.exit_code == second.exit_code == 0
    assert first.stdout == second.stdout
    assert "already names job" in second.stderr


def test_the_same_key_with_another_spec_is_a_conflict(db_url: str) -> None:
    assert _msbatch("--key", "k", str(TRAINING)).exit_code == 0
    result = _msbatch("--key", "k", "-t", "10", str(TRAINING))
    assert result.exit_code == 1
    assert "msbatch: error: idempotency key 'k' was already used" in result.stderr


def test_db_option_overrides_the_environment(db_url: str, tmp_path: Path) -> None:
    other = f"sqlite:///{tmp_path / 'other.sqlite'}"
    short_id = _msbatch("--parsable", "--db", other, str(TRAINING)).stdout.strip()
    assert Service.open(other).status(short_id).summary.name == "llama7b-pretrain"


def test_array_job_has_one_task_per_index(db_url: str) -> None:
    short_id = _msbatch("--parsable", str(GOLDEN / "array_infer_t4.sh")).stdout.strip()
    status = Service.open(db_url).status(short_id)
    assert [task.name for task in status.tasks] == [str(index) for index in range(16)]


def test_test_only_prints_the_spec_and_submits_nothing(db_url: str) -> None:
    result = _msbatch("--test-only", "--kind=evaluation", str(GOLDEN / "eval_1gpu.sh"), "/ckpt/x.pt")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kind"] == "evaluation"
    assert Service.open(db_url).list_jobs() == []


@pytest.mark.parametrize(
    ("argv", "want_message"),
    [
        pytest.param(
            ["--ntasks-per-gpu=2", str(TRAINING)], "unsupported sbatch option --ntasks-per-gpu", id="unsupported"
        ),
        pytest.param(["-A", "t"], "no script given", id="no-script"),
        pytest.param(["missing.sh"], "script 'missing.sh' not found", id="missing-script"),
        pytest.param(["."], "script '.' is a directory", id="directory"),
        pytest.param(
            ["-t", "soon", str(TRAINING)], "invalid --time=soon (on the command line)", id="bad-time"
        ),
        pytest.param(["--key", "k"], "no script given", id="key-only"),
    ],
)
def test_usage_errors_exit_2_without_a_traceback(db_url: str, argv: list[str], want_message: str) -> None:
    result = _msbatch(*argv)
    assert result.exit_code == 2
    assert f"msbatch: error: {want_message}" in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_unsupported_directive_names_its_line(db_url: str, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH -A t\n#SBATCH -N 1\n#SBATCH --ntasks-per-gpu=2\nsrun hostname\n")
    result = _msbatch(str(script))
    assert result.exit_code == 2
    assert result.stderr == (
        "msbatch: error: unsupported sbatch option --ntasks-per-gpu (in #SBATCH line 4): "
        "metasched's resource model counts GPUs per node; use --gpus-per-task or --gres\n"
    )


def test_script_without_shebang(db_url: str, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("srun hostname\n")
    result = _msbatch("-A", "t", str(script))
    assert result.exit_code == 2 and "must start with #!" in result.stderr


def test_unreadable_script(db_url: str, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_bytes(b"#!/bin/bash\n\xff\xfe\n")
    result = _msbatch("-A", "t", str(script))
    assert result.exit_code == 2 and "not a UTF-8 text file" in result.stderr


def test_command_line_wins_over_directives_end_to_end(db_url: str) -> None:
    short_id = _msbatch("--parsable", "-J", "override", "-p", "a100-long", str(TRAINING)).stdout.strip()
    status = Service.open(db_url).status(short_id)
    assert (status.summary.name, status.spec["partition"]) == ("override", "a100-long")


@pytest.mark.parametrize("flag", ["--help", "-h", "--usage"])
def test_help(flag: str) -> None:
    result = _msbatch(flag)
    assert result.exit_code == 0 and "Usage: msbatch [OPTIONS] script.sh [args...]" in result.stdout
    assert "--gpus-per-node" in result.stdout


def test_version() -> None:
    result = _msbatch("-V")
    assert result.exit_code == 0 and result.stdout.startswith("msbatch (metasched ")


@pytest.mark.parametrize(
    ("option", "words"),
    [("--partition=nosuch", "Invalid partition name specified"), ("--qos=nosuch", "Invalid qos specification")],
)
def test_unknown_partition_and_qos_are_refused_in_sbatchs_line(db_url: str, option: str, words: str) -> None:
    from meta.model.nodes import NodeState
    from meta.model.resources import ResourceVector
    from meta.store.db import Database
    from meta.store.inventory import save_inventory

    assert _msbatch("-A", "t", "--wrap", "true").exit_code == 0  # the store exists
    db = Database(db_url)
    node = NodeState("a100n1", ResourceVector(cpus=32, memory="256G", gpus=8, gpu_type="a100"), ("gpu", "a100"))
    with db.session() as session:
        save_inventory(session, [node], 1, {}, ["normal"])
    db.engine.dispose()
    result = _msbatch("-A", "t", option, "--wrap", "true")
    assert (result.exit_code, result.stderr) == (2, f"msbatch: error: Batch job submission failed: {words}\n")

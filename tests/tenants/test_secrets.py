"""Secrets: stored by name with owner-only permissions; rendered scripts carry paths, never values."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from meta.model.errors import InvalidRequest
from meta.model.kinds import JobKind
from slurm_bridge.launch import LaunchRequest
from slurm_bridge.render import render
from tenants.secrets import delete_secret, secret_names, set_secret

VALUE = "hunter2-very-secret"


def test_secret_files_are_owner_only(tmp_path: Path) -> None:
    path = set_secret(tmp_path, "tenant-a", "WANDB_API_KEY", VALUE)
    assert path.read_text() == VALUE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert secret_names(tmp_path, "tenant-a") == ["WANDB_API_KEY"]
    assert delete_secret(tmp_path, "tenant-a", "WANDB_API_KEY")
    assert secret_names(tmp_path, "tenant-a") == []


@pytest.mark.parametrize("name", ["METASCHED_X", "1BAD", "a-b", ""])
def test_bad_secret_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidRequest):
        set_secret(tmp_path, "tenant-a", name, VALUE)


def test_rendered_script_reads_values_on_the_node_and_never_contains_them(tmp_path: Path) -> None:
    set_secret(tmp_path, "tenant-a", "WANDB_API_KEY", VALUE)
    script = render(
        LaunchRequest(
            attempt_id="a1",
            attempt_number=1,
            fencing_token=1,
            job_id="j",
            task_id="t",
            tenant="tenant-a",
            kind=JobKind.EVALUATION,
            time_limit_s=60,
            command="python eval.py",
            secret_names=("WANDB_API_KEY",),
            secrets_dir=str(tmp_path / "tenant-a"),
        )
    )
    assert VALUE not in script
    assert f'export WANDB_API_KEY="$(cat {tmp_path}/tenant-a/WANDB_API_KEY)"' in script


def test_cli_takes_values_from_stdin_and_never_prints_them(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"METASCHED_DB": f"sqlite:///{tmp_path / 'db.sqlite'}"}
    result = runner.invoke(cli, ["secret", "set", "tenant-a", "TOKEN", "--root", str(tmp_path)], input=VALUE, env=env)
    assert result.exit_code == 0 and VALUE not in result.output
    listed = runner.invoke(cli, ["secret", "list", "tenant-a", "--root", str(tmp_path)], env=env)
    assert listed.output.strip() == "TOKEN"
    other = runner.invoke(
        cli, ["--tenant", "tenant-b", "secret", "list", "tenant-a", "--root", str(tmp_path)], env=env
    )
    assert other.exit_code == 1

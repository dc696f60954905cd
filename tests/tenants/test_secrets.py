"""Secrets: stored by name with owner-only permissions; rendered scripts carry paths, never values."""

from __future__ import annotations

import json
import os
import pwd
import sqlite3
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from meta.model.errors import InvalidRequest
from meta.model.kinds import JobKind
from slurm_bridge.launch import LaunchRequest
from slurm_bridge.render import render
from tenants.secrets import (
    UnsafePath,
    delete_secret,
    secret_names,
    secret_users,
    set_secret,
    set_secret_users,
)

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


def test_rendered_script_fetches_values_through_the_api_and_never_contains_them(tmp_path: Path) -> None:
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
            site="s1",
            command="python eval.py",
            secret_names=("WANDB_API_KEY",),
        )
    )
    assert VALUE not in script and str(tmp_path) not in script
    assert '__metasched_secrets="$(metasched job secrets --export)" || {' in script
    lines = script.splitlines()
    fetch = next(i for i, line in enumerate(lines) if "job secrets --export" in line)
    assert lines[fetch + 1] == 'eval "$__metasched_secrets"; unset __metasched_secrets'
    assert lines[-1].startswith("exec ")  # the user's command starts only after the fetch


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


# --- untrusted names and planted symlinks (issue 11) ------------------------------------------


def _cli(tmp_path: Path, *args: str, tenant: str | None = None, value: str | None = None):
    """_cli runs ``metasched [--tenant T] secret ARGS --root <tmp>/secrets`` against a SQLite store."""
    env = {"METASCHED_DB": f"sqlite:///{tmp_path / 'db.sqlite'}", "METASCHED_TENANT": None}
    argv = (["--tenant", tenant] if tenant else []) + ["secret", *args, "--root", str(tmp_path / "secrets")]
    return CliRunner().invoke(cli, argv, input=value, env=env, prog_name="metasched")


@pytest.mark.parametrize("name", ["../tenant-b/B_KEY", "/etc/hostname-like", "B_KEY/..", ".", ".."])
def test_delete_takes_only_a_name_inside_the_tenant_folder(tmp_path: Path, name: str) -> None:
    root = tmp_path / "secrets"
    other = set_secret(root, "tenant-b", "B_KEY", VALUE)
    outside = tmp_path / "hostname-like"
    outside.write_text("keep me")
    target = name.replace("/etc/hostname-like", str(outside))
    with pytest.raises(InvalidRequest):
        delete_secret(root, "tenant-a", target)
    result = _cli(tmp_path, "delete", "tenant-a", target, tenant="tenant-a")
    assert result.exit_code == 2 and "invalid secret name" in result.stderr
    assert other.read_text() == VALUE and outside.read_text() == "keep me"


@pytest.mark.parametrize("name", ["LEAKME\n", "LEAKME\r", "\nLEAKME", "A B", "A" * 129])
def test_names_with_a_trailing_newline_or_other_junk_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidRequest):
        set_secret(tmp_path, "tenant-a", name, VALUE)
    with pytest.raises(InvalidRequest):
        delete_secret(tmp_path, "tenant-a", name)
    assert not (tmp_path / "tenant-a").exists() or secret_names(tmp_path, "tenant-a") == []


@pytest.mark.parametrize("tenant", ["tenant-a\n", "../x", "", ".hidden", "a/b"])
def test_bad_tenant_names_are_refused(tmp_path: Path, tenant: str) -> None:
    with pytest.raises(InvalidRequest):
        set_secret(tmp_path, tenant, "TOKEN", VALUE)
    assert list(tmp_path.iterdir()) == []


def test_set_refuses_a_symlinked_tenant_folder_and_leaves_its_target_alone(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "secrets", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir(mode=0o755)
    elsewhere.chmod(0o755)
    (root / "tenant-a").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafePath, match="tenant-a"):
        set_secret(root, "tenant-a", "TOKEN", VALUE)
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o755 and list(elsewhere.iterdir()) == []
    with pytest.raises(UnsafePath):
        secret_names(root, "tenant-a")
    result = _cli(tmp_path, "set", "tenant-a", "TOKEN", value=VALUE)
    assert result.exit_code == 1 and "symlink" in result.stderr and "Traceback" not in result.output
    assert list(elsewhere.iterdir()) == []


def test_set_never_writes_through_a_planted_temp_or_target_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("original")
    folder = set_secret(tmp_path / "secrets", "tenant-a", "OTHER", "x").parent
    (folder / ".TOKEN.tmp").symlink_to(victim)
    (folder / "TOKEN").symlink_to(victim)
    path = set_secret(tmp_path / "secrets", "tenant-a", "TOKEN", VALUE)
    assert victim.read_text() == "original"
    assert not path.is_symlink() and path.read_text() == VALUE
    assert stat.S_IMODE(path.lstat().st_mode) == 0o600


def test_delete_of_a_symlink_named_like_a_secret_never_touches_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("original")
    folder = set_secret(tmp_path / "secrets", "tenant-a", "OTHER", "x").parent
    (folder / "LINK").symlink_to(victim)
    assert not delete_secret(tmp_path / "secrets", "tenant-a", "LINK")
    assert victim.read_text() == "original" and (folder / "LINK").is_symlink()


def test_list_shows_only_regular_files(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("original")
    folder = set_secret(tmp_path / "secrets", "tenant-a", "REAL", "x").parent
    (folder / "LINKED").symlink_to(victim)
    (folder / "SUBDIR").mkdir()
    assert secret_names(tmp_path / "secrets", "tenant-a") == ["REAL"]


def test_a_tenant_folder_that_others_may_write_or_do_not_own_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = set_secret(tmp_path, "tenant-a", "TOKEN", VALUE).parent
    folder.chmod(0o777)
    with pytest.raises(UnsafePath, match="writable"):
        set_secret(tmp_path, "tenant-a", "TOKEN", "new")
    folder.chmod(0o700)
    mine = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: mine + 4242)
    with pytest.raises(UnsafePath, match="owned by"):
        set_secret(tmp_path, "tenant-a", "TOKEN", "new")
    monkeypatch.undo()
    assert (folder / "TOKEN").read_text() == VALUE


def test_a_new_tenant_folder_is_0700_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = set_secret(tmp_path, "tenant-a", "TOKEN", VALUE)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.parent.lstat().st_mode) == 0o700
    assert stat.S_IMODE(path.lstat().st_mode) == 0o600


def test_secret_set_and_delete_are_audited_by_name_and_the_value_is_nowhere(tmp_path: Path) -> None:
    assert _cli(tmp_path, "set", "tenant-a", "TOKEN", tenant="tenant-a", value=VALUE + "\n").exit_code == 0
    assert _cli(tmp_path, "delete", "tenant-a", "TOKEN", tenant="tenant-a").exit_code == 0
    env = {"METASCHED_DB": f"sqlite:///{tmp_path / 'db.sqlite'}", "METASCHED_TENANT": None}
    shown = CliRunner().invoke(cli, ["audit", "--json"], env=env)
    events = json.loads(shown.stdout)
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert [(e["actor"], e["action"], e["tenant"], e["subject"]) for e in reversed(events)] == [
        (me, "secret.set", "tenant-a", "tenant-a/TOKEN"),
        (me, "secret.delete", "tenant-a", "tenant-a/TOKEN"),
    ]
    with sqlite3.connect(tmp_path / "db.sqlite") as connection:
        rows = connection.execute("SELECT * FROM audit_events").fetchall()
    assert len(rows) == 2 and VALUE not in repr(rows) and VALUE not in shown.output


def test_a_refused_secret_change_is_not_audited(tmp_path: Path) -> None:
    assert _cli(tmp_path, "delete", "tenant-a", "../tenant-b/B_KEY").exit_code == 2
    assert _cli(tmp_path, "delete", "tenant-a", "MISSING").exit_code == 1
    env = {"METASCHED_DB": f"sqlite:///{tmp_path / 'db.sqlite'}", "METASCHED_TENANT": None}
    assert json.loads(CliRunner().invoke(cli, ["audit", "--json"], env=env).stdout) == []


# --- who may read a secret (issue 22, S15) --------------------------------------------------------


def test_a_secrets_users_are_kept_beside_it_unlisted_0600_and_go_with_it(tmp_path: Path) -> None:
    set_secret(tmp_path, "tenant-a", "TOKEN", "v")
    assert secret_users(tmp_path, "tenant-a", "TOKEN") is None  # the default: every member's job
    set_secret_users(tmp_path, "tenant-a", "TOKEN", ["bob", "alice", "alice"])
    assert secret_users(tmp_path, "tenant-a", "TOKEN") == ["alice", "bob"]
    assert secret_names(tmp_path, "tenant-a") == ["TOKEN"]
    users_file = tmp_path / "tenant-a" / ".TOKEN.users"
    assert stat.S_IMODE(users_file.stat().st_mode) == 0o600
    set_secret(tmp_path, "tenant-a", "TOKEN", "rotated")
    assert secret_users(tmp_path, "tenant-a", "TOKEN") == ["alice", "bob"]  # a new value never widens it
    set_secret_users(tmp_path, "tenant-a", "TOKEN", [])
    assert secret_users(tmp_path, "tenant-a", "TOKEN") == []  # no one, until a coordinator names someone
    assert delete_secret(tmp_path, "tenant-a", "TOKEN") and not users_file.exists()
    with pytest.raises(InvalidRequest, match="invalid user name"):
        set_secret_users(tmp_path, "tenant-a", "TOKEN", ["alice\nroot"])


def test_a_link_planted_at_the_users_file_is_replaced_never_followed(tmp_path: Path) -> None:
    set_secret(tmp_path, "tenant-a", "TOKEN", "v")
    victim = tmp_path / "victim"
    victim.write_text("root\n")
    (tmp_path / "tenant-a" / ".TOKEN.users").symlink_to(victim)
    assert secret_users(tmp_path, "tenant-a", "TOKEN") is None  # a link is no list
    set_secret_users(tmp_path, "tenant-a", "TOKEN", ["alice"])
    assert victim.read_text() == "root\n" and secret_users(tmp_path, "tenant-a", "TOKEN") == ["alice"]

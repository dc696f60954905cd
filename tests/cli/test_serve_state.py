"""The daemon's state folder: per user, 0700 and verified; the store URL written 0600, never through a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from cli.serve_cmd import serve
from meta.config.paths import default_state_dir
from meta.serve.state_dir import prepare_daemon_files, url_file_name
from meta.store.db import write_url_file
from meta.store.private_files import UnsafePath

URL = "postgresql+psycopg://metasched:s3cr3t-password@db.example/metasched"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_default_state_dir_is_the_users_own_and_never_under_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_state_dir() == tmp_path / "xdg" / "metasched"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_state_dir() == Path.home() / ".local" / "state" / "metasched"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/dir")  # the XDG spec says to ignore a relative one
    assert default_state_dir() == Path.home() / ".local" / "state" / "metasched"


def test_serve_defaults_name_no_world_creatable_tmp_folder() -> None:
    defaults = {param.name: param.default for param in serve.params}
    assert not str(defaults["log_dir"] or "").startswith("/tmp")
    assert defaults["state_dir"] is None  # computed per user at start: default_state_dir()


def test_the_state_folder_is_created_0700_and_the_url_file_0600(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        files = prepare_daemon_files(tmp_path / "state", URL, log_dir=None)
    finally:
        os.umask(old)
    assert files.state_dir == tmp_path / "state" and _mode(files.state_dir) == 0o700
    assert files.db_url_file == files.state_dir / url_file_name(URL) and _mode(files.db_url_file) == 0o600
    assert files.db_url_file.read_text() == URL + "\n"
    assert files.log_dir == files.state_dir / "logs" and _mode(files.log_dir) == 0o700
    assert sorted(p.name for p in files.state_dir.iterdir()) == sorted(["logs", url_file_name(URL)])


def test_an_explicit_log_dir_is_kept_as_given(tmp_path: Path) -> None:
    files = prepare_daemon_files(tmp_path / "state", URL, log_dir=str(tmp_path / "job-logs"))
    assert files.log_dir == tmp_path / "job-logs"
    assert not (files.state_dir / "logs").exists()


def test_stores_get_their_own_url_files_and_the_name_tells_nothing(tmp_path: Path) -> None:
    other = "sqlite:////var/lib/x.sqlite"
    assert url_file_name(URL) != url_file_name(other)
    assert "s3cr3t" not in url_file_name(URL) and "metasched" not in url_file_name(URL).removeprefix("db-url-")
    a = prepare_daemon_files(tmp_path / "state", URL, log_dir=None)
    b = prepare_daemon_files(tmp_path / "state", other, log_dir=None)
    assert a.db_url_file.read_text() == URL + "\n" and b.db_url_file.read_text() == other + "\n"


def test_a_state_folder_that_is_a_symlink_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "attacker"
    target.mkdir()
    target.chmod(0o755)
    (tmp_path / "state").symlink_to(target, target_is_directory=True)
    with pytest.raises(UnsafePath, match="symlink"):
        prepare_daemon_files(tmp_path / "state", URL, log_dir=None)
    assert list(target.iterdir()) == [] and _mode(target) == 0o755


def test_a_state_folder_others_may_write_or_that_is_not_ours_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    with pytest.raises(UnsafePath, match="writable"):
        prepare_daemon_files(state, URL, log_dir=None)
    state.chmod(0o700)
    mine = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: mine + 4242)
    with pytest.raises(UnsafePath, match="owned by"):
        prepare_daemon_files(state, URL, log_dir=None)
    monkeypatch.undo()
    assert list(state.iterdir()) == []


def test_an_old_state_folder_readable_by_others_is_tightened(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)
    prepare_daemon_files(state, URL, log_dir=None)
    assert _mode(state) == 0o700


def test_a_planted_link_at_the_url_file_is_replaced_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("original")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / url_file_name(URL)).symlink_to(victim)
    files = prepare_daemon_files(state, URL, log_dir=None)
    assert victim.read_text() == "original"
    assert not files.db_url_file.is_symlink() and files.db_url_file.read_text() == URL + "\n"


def test_write_url_file_never_writes_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("original")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / ".metasched-db-url").symlink_to(victim)
    path = write_url_file(URL, tmp_path / "logs" / ".metasched-db-url")
    assert victim.read_text() == "original"
    assert not path.is_symlink() and path.read_text() == URL + "\n" and _mode(path) == 0o600
    assert [p.name for p in path.parent.iterdir()] == [".metasched-db-url"]  # no temp file left behind


def _slurm_down(tmp_path: Path) -> Path:
    """_slurm_down is a bin dir whose Slurm commands all fail: one period runs without touching a cluster."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for command in ("sinfo", "squeue", "sacct", "sbatch", "scancel", "scontrol", "sdiag", "sacctmgr"):
        script = bin_dir / command
        script.write_text("#!/bin/sh\necho 'slurm is down' >&2\nexit 1\n")
        script.chmod(0o755)
    return bin_dir


def _serve_once(tmp_path: Path, *extra: str) -> Result:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    argv = ["serve", "--once", "--metrics-port", "0", "--slurm-bin-dir", str(_slurm_down(tmp_path)), *extra]
    return CliRunner().invoke(
        cli, argv, env={"METASCHED_DB": url, "METASCHED_STATE_DIR": None, "METASCHED_TENANT": None}, prog_name="metasched"
    )


def test_serve_writes_the_url_file_in_its_state_dir(tmp_path: Path) -> None:
    result = _serve_once(tmp_path, "--state-dir", str(tmp_path / "state"))
    assert result.exit_code == 0, result.output
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    url_file = tmp_path / "state" / url_file_name(url)
    assert url_file.read_text() == url + "\n" and _mode(url_file) == 0o600 and _mode(tmp_path / "state") == 0o700
    assert url not in result.output


def test_serve_refuses_a_symlinked_state_dir_in_one_line(tmp_path: Path) -> None:
    target = tmp_path / "attacker"
    target.mkdir()
    (tmp_path / "state").symlink_to(target, target_is_directory=True)
    result = _serve_once(tmp_path, "--state-dir", str(tmp_path / "state"))
    assert result.exit_code == 1 and "symlink" in result.stderr and result.stderr.count("\n") == 1
    assert "Traceback" not in result.output and list(target.iterdir()) == []

"""S10 and S11: root's folders and the store are root's, whoever got to a path first (issue 22).

S10: ``serve --log-dir`` is checked like the state folder, and the quickstart refuses a folder
another user made or may write, before it starts anything. S11: the SQLite store metasched
creates is 0600 in a 0700 folder. The other user is mallory (uid 2006, a local account with no
Slurm association): she makes the folders and tries to read the store, as herself.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from meta.serve.state_dir import prepare_daemon_files
from meta.store.db import Database
from meta.store.migrate import ensure_schema
from meta.store.private_files import UnsafePath

pytestmark = [pytest.mark.slurm]  # mallory, a real other user, comes with the dev cluster

REPO = Path(__file__).resolve().parents[2]
ATTACKER = "mallory"
URL = "sqlite:////nonexistent/for-the-url-file-only.sqlite"


def _as(user: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """_as runs argv as ``user`` (runuser), returning what it did."""
    return subprocess.run(["runuser", "-u", user, "--", *argv], capture_output=True, text=True, timeout=60)


@pytest.fixture
def shared_tmp(slurm_cluster: None) -> Iterator[Path]:
    """shared_tmp is a 1777 folder like /tmp, of its own: what any local user may create names in.

    The dev cluster's gate (root, ``deploy/devcluster up``) is what makes mallory exist.
    """
    folder = Path(tempfile.mkdtemp(prefix="metasched-s10-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _serve(tmp_path: Path, log_dir: Path) -> subprocess.CompletedProcess[str]:
    """_serve starts ``metasched serve --once`` as root with ``--log-dir`` (an own SQLite store, no API)."""
    argv = [
        sys.executable, "-c", "from cli.main import main; main()", "--db", f"sqlite:///{tmp_path / 'db' / 's.sqlite'}",
        "serve", "--once", "--no-api", "--metrics-port", "0", "--log-level", "WARNING",
        "--state-dir", str(tmp_path / "state"), "--log-dir", str(log_dir), "--slurm-bin-dir", str(tmp_path / "none"),
    ]  # fmt: skip
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)


# --- S10: serve --log-dir ----------------------------------------------------------------------


@pytest.mark.parametrize("planted", ["folder 0777", "folder 0755", "symlink"])
def test_serve_refuses_a_log_dir_another_user_made_first(
    shared_tmp: Path, tmp_path: Path, planted: str
) -> None:
    logs = shared_tmp / "metasched-logs"
    mallorys = shared_tmp / "mallorys"
    assert _as(ATTACKER, "mkdir", "-m", "0777", str(mallorys)).returncode == 0
    if planted == "symlink":
        assert _as(ATTACKER, "ln", "-s", str(mallorys), str(logs)).returncode == 0
    else:
        assert _as(ATTACKER, "mkdir", "-m", planted.split()[1], str(logs)).returncode == 0
    done = _serve(tmp_path, logs)
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(logs) in lines[0] and "refused" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert (
        list(mallorys.iterdir()) == [] and _mode(mallorys) == 0o777
    )  # nothing written into hers, nothing changed


def test_a_missing_log_dir_is_made_roots_and_0700(tmp_path: Path) -> None:
    files = prepare_daemon_files(tmp_path / "state", URL, log_dir=str(tmp_path / "var" / "logs"))
    info = files.log_dir.lstat()
    assert files.log_dir == tmp_path / "var" / "logs" and stat.S_ISDIR(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()


def test_a_log_dir_others_may_write_is_refused_by_the_same_check_as_the_state_folder(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    logs.chmod(0o775)
    with pytest.raises(UnsafePath, match="writable by group or others"):
        prepare_daemon_files(tmp_path / "state", URL, log_dir=str(logs))
    logs.chmod(0o755)  # readable by others, written only by us: tightened, as an old state folder is
    prepare_daemon_files(tmp_path / "state", URL, log_dir=str(logs))
    assert _mode(logs) == 0o700


# --- S10: the quickstart's folder ------------------------------------------------------------------


@pytest.mark.parametrize("planted", ["mallory's folder", "a folder others may write", "a symlink"])
def test_the_quickstart_refuses_a_folder_it_does_not_own_alone_before_starting_anything(
    shared_tmp: Path, tmp_path: Path, planted: str
) -> None:
    qs = shared_tmp / "metasched-quickstart"
    if planted == "mallory's folder":
        assert _as(ATTACKER, "mkdir", "-m", "0755", str(qs)).returncode == 0
    elif planted == "a folder others may write":
        qs.mkdir()
        qs.chmod(0o777)
    else:
        assert _as(ATTACKER, "mkdir", "-m", "0777", str(shared_tmp / "hers")).returncode == 0
        assert _as(ATTACKER, "ln", "-s", str(shared_tmp / "hers"), str(qs)).returncode == 0
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "none.yaml").write_text("kind: evaluation\n")
    env = {**os.environ, "METASCHED_QUICKSTART_DIR": str(qs)}
    done = subprocess.run([str(REPO / "deploy" / "quickstart"), "--no-install", "--examples", str(examples)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"quickstart: {qs} is not a folder of root's that only it may write; remove it or set METASCHED_QUICKSTART_DIR"
    ]
    assert "== Slurm dev cluster" not in done.stdout  # refused before the cluster, serve or any job
    assert not any(p.name in ("state", "logs", "demo") for p in qs.iterdir())


def test_the_quickstarts_default_folder_is_not_under_a_shared_temp_dir() -> None:
    script = (REPO / "deploy" / "quickstart").read_text()
    default = script.split("qs=${METASCHED_QUICKSTART_DIR:-", 1)[1].split("}", 1)[0]
    assert default.startswith("/var/lib/") and not default.startswith(("/tmp", "/var/tmp", "/dev/shm"))
    for flag in ("--state-dir", "--log-dir"):  # serve's folders are under it
        assert f'{flag} "$qs/' in script or f'{flag} "$logs"' in script, flag


# --- S11: the SQLite store ---------------------------------------------------------------------------


def test_a_new_sqlite_store_is_0600_in_a_0700_folder_and_another_user_cannot_read_it(
    shared_tmp: Path,
) -> None:
    root = Path(tempfile.mkdtemp(prefix="store-", dir=shared_tmp))
    root.chmod(0o755)
    path = root / "data" / "metasched.sqlite"
    old = os.umask(0o022)  # the usual umask: SQLite alone made 0644 in a 0755 folder
    try:
        db = Database(f"sqlite:///{path}")
        ensure_schema(db.engine, db.url)
        db.dispose()
    finally:
        os.umask(old)
    assert _mode(path.parent) == 0o700 and _mode(path) == 0o600
    assert path.stat().st_size > 0
    for sidecar in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        assert not sidecar.exists() or _mode(sidecar) == 0o600, sidecar
    read = _as(ATTACKER, "cat", str(path))
    assert read.returncode != 0 and "Permission denied" in read.stderr


def test_an_existing_store_file_is_opened_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "kept.sqlite"
    path.touch(mode=0o640)
    path.chmod(0o640)
    db = Database(f"sqlite:///{path}")
    with db.session() as session:
        session.connection().exec_driver_sql("select 1")
    db.dispose()
    assert _mode(path) == 0o640  # the operator's choice is left alone; only a new file is made 0600

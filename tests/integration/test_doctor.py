"""``metasched doctor`` on the real dev cluster: all is well as ``deploy/devcluster up`` leaves it, then
prerequisites broken one by one, each named by the check that fails.

One real ``metasched serve`` answers the job API: on a fresh, migrated SQLite store (and on the
PostgreSQL test store, whose clock the doctor compares too), with a settings file that the doctor
reads as well (``--config``). Its Slurm folder holds only sacctmgr and scontrol, so its cycle
touches no job of another test. Nothing of the cluster is changed: a broken slurm.conf is a copy of
/etc/slurm with one line edited, passed with ``--slurm-conf``; a wrong MUNGE key is a second munged
of our own on its own socket; a closed port is one we hold bound without listening.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from meta.store.db import Database
from tests.conftest import sqlite_database
from tests.harness import accounting_slurm_bin

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
ETC_SLURM = Path("/etc/slurm")
# ran as alice: the interpreter and its packages are root's (/root is 0700), so alice keeps only the right to read
# files (CAP_DAC_READ_SEARCH); she is uid 2001 in every other way: MUNGE, Slurm and the doctor see alice
AS_ALICE = ["setpriv", "--reuid=alice", "--regid=alice", "--init-groups", "--inh-caps=+dac_read_search",
            "--ambient-caps=+dac_read_search"]  # fmt: skip


@dataclass(frozen=True)
class Site:
    """Site is the running serve the doctor checks: its settings file, its store, its API socket."""

    config: Path
    db_url: str
    socket: Path
    folder: Path


@dataclass(frozen=True)
class Result:
    """Result is one doctor run: its exit code, its checks by name and what it printed."""

    code: int
    checks: dict[str, dict[str, str]]
    stdout: str
    stderr: str

    def status(self, name: str) -> str:
        """status is one check's status."""
        return self.checks[name]["status"]

    def failed(self) -> list[str]:
        """failed are the names of the failed checks."""
        return [name for name, check in self.checks.items() if check["status"] == "fail"]


def _clean_env() -> dict[str, str]:
    """_clean_env is this environment without metasched's and Slurm's variables: only the flags speak."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("METASCHED_", "SLURM_"))}


@pytest.fixture
def folder() -> Iterator[Path]:
    """folder is a 0755 folder under /tmp (alice must reach the socket in it)."""
    path = Path(tempfile.mkdtemp(prefix="metasched-doctor-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _serve(config: Path, db_url: str, folder: Path) -> Iterator[Path]:
    """_serve runs ``metasched serve --config`` until the test ends; yields its API socket."""
    sock = folder / "run" / "api.sock"
    argv = [sys.executable, "-c", "from cli.main import main; main()", "--db", db_url, "serve", "--config", str(config),
            "--metrics-port", "0", "--slurm-bin-dir", str(accounting_slurm_bin(folder)), "--log-level", "WARNING"]  # fmt: skip
    log = folder / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=_clean_env())
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the API socket never appeared"
            time.sleep(0.1)
        yield sock
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _config(folder: Path) -> Path:
    """_config is the site's settings file: the one serve runs with and the doctor reads."""
    config = folder / "metasched.toml"
    config.write_text(f'state_dir = "{folder / "state"}"\napi_socket = "{folder / "run" / "api.sock"}"\n'
                      'api_listen = "off"\nmanaged_partitions = ["managed"]\nperiod = 5.0\n'
                      f'secrets_root = "{folder / "secrets"}"\n')  # fmt: skip
    return config


@pytest.fixture
def site(slurm_exclusive: None, folder: Path) -> Iterator[Site]:
    """site is serve on a fresh, migrated SQLite store, as a healthy one-host site runs it."""
    store = folder / "store" / "ms.sqlite"
    store.parent.mkdir()
    sqlite_database(store).dispose()
    config = _config(folder)
    url = f"sqlite:///{store}"
    with _serve(config, url, folder) as sock:
        yield Site(config, url, sock, folder)


@pytest.fixture
def pg_site(slurm_exclusive: None, pg_database: Database, folder: Path) -> Iterator[Site]:
    """pg_site is serve on the PostgreSQL test store."""
    config = _config(folder)
    with _serve(config, pg_database.url, folder) as sock:
        yield Site(config, pg_database.url, sock, folder)


def doctor(site: Site, *args: str, db_url: str | None = None, prefix: tuple[str, ...] = (),
           as_json: bool = True) -> Result:  # fmt: skip
    """doctor runs ``metasched doctor --config <the site's> --db <its store> ARGS`` as the CLI runs."""
    argv = [*prefix, sys.executable, "-c", "from cli.main import main; main()", "doctor", "--config", str(site.config),
            "--db", db_url or site.db_url, *(["--json"] if as_json else []), *args]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, env=_clean_env())
    assert time.monotonic() - started < 45, "the doctor took too long"  # its deadline is 30 s, plus start-up
    assert "Traceback" not in done.stderr, done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]} if as_json and done.stdout.strip() else {}
    return Result(done.returncode, checks, done.stdout, done.stderr)


def broken(result: Result, name: str, *said: str) -> None:
    """broken asserts the doctor exits 1 and that check ``name`` fails with a message saying ``said``."""
    assert result.code == 1, result.stdout + result.stderr
    assert result.status(name) == "fail", json.dumps(result.checks, indent=1)
    message = result.checks[name]["message"]
    print(f"FAIL {name}: {message}")  # what an admin reads (pytest -s)
    for words in said:
        assert words in message, message


@pytest.fixture
def closed_port() -> Iterator[int]:
    """closed_port is a local TCP port bound by us and not listening: a connection to it is refused."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    yield holder.getsockname()[1]
    holder.close()


@pytest.fixture
def slurm_copy(folder: Path) -> Callable[[Callable[[str], str]], Path]:
    """slurm_copy copies /etc/slurm (without slurmdbd.conf) and edits the copy's slurm.conf; returns its path."""

    def make(edit: Callable[[str], str]) -> Path:
        copy = Path(tempfile.mkdtemp(prefix="slurm-", dir=folder))
        shutil.copytree(ETC_SLURM, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("slurmdbd.conf"))
        conf = copy / "slurm.conf"
        conf.write_text(edit(conf.read_text()))
        return conf

    return make


def _set(key: str, value: str) -> Callable[[str], str]:
    """_set is an edit replacing the line of ``key`` (or adding one) in slurm.conf's text."""

    def edit(text: str) -> str:
        line = re.compile(rf"^{key}=.*$", re.MULTILINE | re.IGNORECASE)
        return line.sub(f"{key}={value}", text) if line.search(text) else text + f"\n{key}={value}\n"

    return edit


# --- all is well ---------------------------------------------------------------------------------------


def test_all_is_well_on_the_dev_cluster(site: Site) -> None:
    text = doctor(site, as_json=False)
    print(text.stdout)
    assert text.code == 0, text.stdout + text.stderr
    assert text.stdout.strip().splitlines()[-1].startswith("all is well")
    result = doctor(site)
    assert result.code == 0 and not result.failed(), result.stdout
    # the dev cluster's one warning: PrivateData=none (users see each other's jobs in squeue, by design there)
    assert {name for name, check in result.checks.items() if check["status"] == "warn"} <= {"private-data"}
    assert "answers from compute node" in result.checks["job-api"]["message"]
    assert "slurmctld" in result.checks["clock"]["message"]


@pytest.mark.postgres
def test_all_is_well_on_postgresql_with_its_clock_compared(pg_site: Site) -> None:
    result = doctor(pg_site)
    assert result.code == 0 and not result.failed(), result.stdout
    assert "store " in result.checks["clock"]["message"] and result.status("store") == "ok"


def test_private_data_set_passes(site: Site, slurm_copy: Callable[[Callable[[str], str]], Path]) -> None:
    result = doctor(site, "--slurm-conf", str(slurm_copy(_set("PrivateData", "jobs,usage"))))
    assert result.code == 0 and result.status("private-data") == "ok", result.stdout


# --- broken one by one -----------------------------------------------------------------------------------


def test_no_job_comment_in_accounting_store_flags(site: Site, slurm_copy: Callable[[Callable[[str], str]], Path]) -> None:
    conf = slurm_copy(_set("AccountingStoreFlags", "job_script,job_env"))
    result = doctor(site, "--slurm-conf", str(conf))
    broken(result, "accounting-flags", str(conf), "lacks job_comment")
    assert result.failed() == ["accounting-flags"]


def test_slurmdbd_refusing(site: Site, slurm_copy: Callable[[Callable[[str], str]], Path], closed_port: int) -> None:
    result = doctor(site, "--slurm-conf", str(slurm_copy(_set("AccountingStoragePort", str(closed_port)))))
    broken(result, "slurmdbd", f":{closed_port}", "does not answer")
    assert result.failed() == ["slurmdbd"]


def test_slurmctld_unreachable(site: Site, slurm_copy: Callable[[Callable[[str], str]], Path], closed_port: int) -> None:
    result = doctor(site, "--slurm-conf", str(slurm_copy(_set("SlurmctldPort", str(closed_port)))))
    broken(result, "slurmctld", "does not answer", "SlurmctldHost")


def test_job_submit_lua_missing(site: Site, slurm_copy: Callable[[Callable[[str], str]], Path]) -> None:
    conf = slurm_copy(lambda text: text)
    (conf.parent / "job_submit.lua").unlink()
    result = doctor(site, "--slurm-conf", str(conf))
    broken(result, "job-submit", f"no {conf.parent / 'job_submit.lua'}")


def test_a_held_partition_the_daemon_does_not_manage(site: Site) -> None:
    # the quickstart's case: serve without --managed-partitions while job_submit.lua holds `managed`
    result = doctor(site, "--managed-partitions", "")
    broken(result, "managed-partitions", "managed", "held forever")
    assert result.failed() == ["managed-partitions"]


def test_a_managed_partition_slurm_does_not_have(site: Site) -> None:
    broken(doctor(site, "--managed-partitions", "managed,nosuch"), "managed-partitions", "nosuch")


def test_no_munged_at_the_socket(site: Site, folder: Path) -> None:
    missing = folder / "no-munge" / "munge.socket.2"
    result = doctor(site, "--munge-socket", str(missing))
    broken(result, "munged", f"no munged answers at {missing}")
    assert result.failed() == ["munged"]


@pytest.fixture
def other_munged(folder: Path) -> Iterator[Path]:
    """other_munged is a second munged with a key of its own, on its own socket (the site's munged is untouched)."""
    if shutil.which("munged") is None:
        pytest.skip("munged is not installed")
    home = folder / "munge"
    home.mkdir(mode=0o755)
    shutil.chown(home, "munge", "munge")
    key = home / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    shutil.chown(key, "munge", "munge")
    sock = home / "munge.sock"
    started = subprocess.run(["runuser", "-u", "munge", "--", "munged", f"--socket={sock}", f"--key-file={key}",
                              f"--pid-file={home / 'munged.pid'}", f"--seed-file={home / 'seed'}",
                              f"--log-file={home / 'munged.log'}"], capture_output=True, text=True, timeout=30)  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        yield sock
    finally:
        os.kill(int((home / "munged.pid").read_text()), signal.SIGTERM)


def test_a_munged_with_another_key(site: Site, other_munged: Path) -> None:
    result = doctor(site, "--munge-socket", str(other_munged))
    assert result.status("munged") == "ok"  # it answers: only the key is wrong
    broken(result, "munge-key", "another key", str(other_munged))
    assert result.failed() == ["munge-key"]


def test_the_store_unreachable(site: Site, closed_port: int) -> None:
    result = doctor(site, db_url=f"postgresql+psycopg://metasched:pw@127.0.0.1:{closed_port}/metasched")
    broken(result, "store", "cannot reach the store", f"127.0.0.1:{closed_port}")
    assert "pw@" not in result.stdout and result.failed() == ["store"]


def test_the_store_not_migrated(site: Site, folder: Path) -> None:
    empty = folder / "empty.sqlite"
    empty.touch()
    result = doctor(site, db_url=f"sqlite:///{empty}")
    broken(result, "store", "empty", "metasched db upgrade")
    assert empty.stat().st_size == 0 and result.failed() == ["store"]


def test_not_root(site: Site) -> None:
    result = doctor(site, prefix=tuple(AS_ALICE))
    broken(result, "daemon-user", "alice (uid 2001)", "root")
    assert result.failed() == ["daemon-user"]


def test_a_job_api_nobody_listens_on(site: Site, closed_port: int) -> None:
    address = f"http://127.0.0.1:{closed_port}"
    result = doctor(site, "--job-api", address)
    broken(result, "job-api", address, "does not answer from compute node", "--job-api")
    assert result.failed() == ["job-api"]


def test_a_bad_settings_file_is_bad_input(site: Site, folder: Path) -> None:
    bad = folder / "bad.toml"
    bad.write_text("perod = 2\n")
    done = subprocess.run([sys.executable, "-c", "from cli.main import main; main()", "doctor", "--config", str(bad)],
                          cwd=REPO, capture_output=True, text=True, timeout=60, env=_clean_env())  # fmt: skip
    assert done.returncode == 2 and "did you mean 'period'" in done.stderr and "Traceback" not in done.stderr

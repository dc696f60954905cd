"""Jobs run as their users (docs/identity.md §5): who sbatch runs a job as, where, with which environment."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from meta.cycle.actuate.actuator import ActuationResult, Actuator
from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.snapshot.build import SpecCache
from meta.service.api import Service
from meta.store.models import Task
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.fake import FakeSlurm
from slurm_bridge.job_env import USER_PATH, submission_env
from slurm_bridge.launch import LaunchRequestError, RunAs
from slurm_bridge.runner import CommandRunner
from tenants.identity import ADMIN, member
from tests.runtime.support import inference, lead, place, share, training

ALICE = member("alice", 2001, ["acme"])
DAEMON_UID = 0


def _submit(service: Service, spec: object, principal: object, submit_dir: str | None) -> str:
    job = service.submit(spec, principal=principal, submit_dir=submit_dir).job  # type: ignore[arg-type]
    return service.status(job.id).tasks[0].id


def _launch(service: Service, tmp_path: Path) -> FakeSlurm:
    fake = FakeSlurm()
    settings = LaunchSettings(log_dir=str(tmp_path / "logs"), daemon_uid=DAEMON_UID)
    Actuator(service.db, fake, SpecCache(), settings).launch_created(lead(service.db), ActuationResult())
    return fake


def test_a_users_job_is_submitted_as_the_user_in_its_submit_dir(service: Service, tmp_path: Path) -> None:
    task = _submit(service, training(), ALICE, "/home/alice/exp 1")
    place(service.db, task, [share("node1")])
    fake = _launch(service, tmp_path)
    assert fake.submitted_as == [RunAs(uid=2001, gid=2001, chdir="/home/alice/exp 1")]
    (script,) = fake.submitted_scripts
    assert "--output" not in script  # sbatch's default: <submit dir>/slurm-%j.out, written by the user
    assert not (tmp_path / "logs").exists()  # root made no folder for the user's job


def test_the_daemons_own_and_ownerless_jobs_run_as_before(service: Service, tmp_path: Path) -> None:
    root = member("root", DAEMON_UID, ["acme"])
    tasks = [_submit(service, training(name="own"), root, "/root/x"), _submit(service, training(name="old"), ADMIN, None)]
    for number, task in enumerate(tasks):
        place(service.db, task, [share(f"node{number + 1}")])
    fake = _launch(service, tmp_path)
    assert fake.submitted_as == [None, None]
    assert all(f"--output={tmp_path}/logs/" in script for script in fake.submitted_scripts)


def test_a_users_inference_job_makes_its_own_staging_folder(service: Service, tmp_path: Path) -> None:
    output = tmp_path / "alice-out"
    task = _submit(service, inference(str(output), partitions=1), ALICE, "/home/alice")
    attempt = place(service.db, task, [share("node1")])
    fake = _launch(service, tmp_path)
    (script,) = fake.submitted_scripts
    with service.db.session() as session:
        short_id = session.get(Task, task).job.short_id
    # the job's own folder under the output (two jobs from one folder never share staging)
    assert f"mkdir -p -- {output}/{short_id}/_attempts/{attempt} || exit 1" in script
    assert not output.exists()  # made by the job, as alice, not by the daemon as root
    assert "--output" not in script  # never into the staging folder: the log would be committed as output


def test_run_as_is_checked() -> None:
    assert RunAs(2001, 2001, "/home/a b").sbatch_args() == ["--uid=2001", "--gid=2001", "--chdir=/home/a b"]
    assert RunAs(2001, 100).sbatch_args() == ["--uid=2001", "--gid=100"]
    for bad in ({"uid": -1, "gid": 1}, {"uid": 1, "gid": 1, "chdir": "rel"}, {"uid": 1, "gid": 1, "chdir": "/a\x00b"}):
        with pytest.raises(LaunchRequestError):
            RunAs(**bad)  # type: ignore[arg-type]


DAEMON_ENV = {
    "PATH": "/root/.pyenv/shims:/usr/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "METASCHED_DB": "postgresql+psycopg://metasched:pw@db/metasched",
    "METASCHED_DB_FILE": "/root/.local/state/metasched/db-url",
    "METASCHED_TEST_PG_URL": "postgresql+psycopg://u:pw@127.0.0.1/x",
    "PGPASSWORD": "pw",
    "SOME_SQLITE": "sqlite:////var/lib/metasched/metasched.db",
    "METASCHED_FAKE_SBATCH_DELAY": "1",
}


def test_the_daemons_store_never_reaches_a_job() -> None:
    own = submission_env(DAEMON_ENV, None)
    assert own == {"PATH": "/root/.pyenv/shims:/usr/bin", "HOME": "/root", "LANG": "C.UTF-8",
                   "METASCHED_FAKE_SBATCH_DELAY": "1"}  # fmt: skip
    users = submission_env(DAEMON_ENV, RunAs(0, 0))  # uid 0 has a passwd entry on every host
    assert users == {"LANG": "C.UTF-8", "PATH": USER_PATH, "HOME": "/root", "USER": "root", "LOGNAME": "root",
                     "SHELL": users["SHELL"]}  # fmt: skip


def test_a_users_sbatch_keeps_the_daemons_slurm_conf() -> None:
    # a head whose slurm.conf is not /etc/slurm's (deploy/site's heads) reaches its controller through
    # SLURM_CONF; without it sbatch fails with "Unable to contact slurm controller" for every user's job
    env = submission_env({**DAEMON_ENV, "SLURM_CONF": "/run/metasched-site/slurm/slurm.conf"}, RunAs(0, 0))
    assert env["SLURM_CONF"] == "/run/metasched-site/slurm/slurm.conf"
    assert "METASCHED_DB" not in env and "PGPASSWORD" not in env


def test_sbatch_argv_and_environment_for_a_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "call.json"
    fake_sbatch = tmp_path / "sbatch"
    fake_sbatch.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ), 'script': sys.stdin.read()}}, open({str(record)!r}, 'w'))\n"
        "print('4242')\n"
    )
    fake_sbatch.chmod(0o755)
    for name, value in DAEMON_ENV.items():
        monkeypatch.setenv(name, value)
    client = CliSlurmClient(CommandRunner(binaries={"sbatch": [str(fake_sbatch)]}))
    assert client.submit("#!/bin/bash\ntrue\n", run_as=RunAs(os.geteuid(), os.getegid(), "/srv/a dir")) == 4242
    call = json.loads(record.read_text())
    assert call["argv"] == ["--parsable", f"--uid={os.geteuid()}", f"--gid={os.getegid()}", "--chdir=/srv/a dir"]
    assert call["script"] == "#!/bin/bash\ntrue\n"
    assert not any("pw" in value or name.startswith(("METASCHED_DB", "PG")) for name, value in call["env"].items())
    assert call["env"]["PATH"] == USER_PATH
    client.submit("#!/bin/bash\ntrue\n")
    plain = json.loads(record.read_text())
    assert plain["argv"] == ["--parsable"] and "METASCHED_DB" not in plain["env"] and "PGPASSWORD" not in plain["env"]

"""Priority is a right from Slurm: a QOS granted by sacctmgr is what lets a member ask for it (issue 22).

As alice (a plain member of tenant-a) on the dev cluster, side by side with sbatch: ``msbatch
--qos=inference-deadline`` is refused in sbatch's words, exit 1, nothing stored, exactly when
Slurm's own ``sbatch --qos=inference-deadline`` is refused (her association does not list the
QOS), and so is ``metasched submit`` of a job file naming the ``inference-deadline`` priority
class; once ``sacctmgr`` adds the QOS to her association both are accepted (metasched reads the
association again within its 60 s cache). The QOS and the grant are taken away afterwards.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.identity.conftest import Served
from tests.identity.users import Call, Outcome, run_one

pytestmark = [pytest.mark.slurm, pytest.mark.postgres]

QOS = "inference-deadline"
WORDS = "Invalid qos specification"
CACHE_WAIT_S = 90  # the association cache's 60 s, and a margin


def _sacctmgr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sacctmgr", "-i", *args], capture_output=True, text=True, timeout=60)


def _alice_qos(change: str) -> None:
    done = _sacctmgr("modify", "user", "where", "name=alice", "account=tenant-a", "set", f"qos{change}={QOS}")
    assert done.returncode == 0, done.stderr


@pytest.fixture
def deadline_qos(slurm_cluster: None) -> Iterator[None]:
    """deadline_qos is the QOS in Slurm, not (yet) in alice's association; both taken away afterwards."""
    existed = QOS in subprocess.run(["sacctmgr", "-n", "-P", "show", "qos", "format=name"],
                                    capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    if not existed:
        assert _sacctmgr("add", "qos", QOS).returncode == 0
    _alice_qos("-")
    try:
        yield
    finally:
        _alice_qos("-")
        if not existed:
            _sacctmgr("delete", "qos", QOS)


def _msbatch(served: Served) -> Outcome:
    args = ("--parsable", "-A", "tenant-a", f"--qos={QOS}", "--gres=gpu:1", "--hold", "--wrap", "true")
    return run_one(Call("alice", args, prog="msbatch"), served.api, served.folder)


def _submit_class(served: Served) -> Outcome:
    """_submit_class is alice's ``metasched submit`` of an inference job in the inference-deadline class."""
    job = served.folder / "deadline-class.yaml"
    job.write_text(f"kind: inference\nname: urgent\ntenant: tenant-a\npriority_class: {QOS}\npartitions: 1\n"
                   f"output: {served.folder}/out-urgent\nresources: {{cpus: 1, gpus: 1}}\ncommand: 'true'\n"
                   "hold: true\n")  # fmt: skip
    job.chmod(0o644)
    return run_one(Call("alice", ("submit", "-f", str(job), "--json")), served.api, served.folder)


def _sbatch() -> subprocess.CompletedProcess[str]:
    argv = ["runuser", "-u", "alice", "--", "sbatch", "--parsable", "-A", "tenant-a", "-p", "managed",
            f"--qos={QOS}", "--hold", "--wrap", "true"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd="/tmp")


def test_a_qos_is_a_members_right_only_once_sacctmgr_grants_it(served: Served, deadline_qos: None) -> None:
    refused, slurm_refused = _msbatch(served), _sbatch()
    assert (slurm_refused.returncode, WORDS in slurm_refused.stderr) == (1, True), slurm_refused.stderr
    assert (refused.code, WORDS in refused.stderr, refused.stdout) == (1, True, ""), refused
    assert "Traceback" not in refused.stderr
    by_class = _submit_class(served)  # the class needs the QOS of its name (or an admin's list)
    assert (by_class.code, WORDS in by_class.stderr) == (1, True), by_class
    assert run_one(Call("alice", ("list", "--json")), served.api, served.folder).json() == []  # nothing stored

    _alice_qos("+")
    slurm_accepted = _sbatch()
    assert slurm_accepted.returncode == 0, slurm_accepted.stderr
    subprocess.run(["scancel", slurm_accepted.stdout.strip().split(";")[0]], check=True, timeout=60)
    deadline = time.monotonic() + CACHE_WAIT_S
    accepted = _msbatch(served)
    while accepted.code != 0 and WORDS in accepted.stderr and time.monotonic() < deadline:
        time.sleep(5)  # metasched reads the association again when its cache entry expires
        accepted = _msbatch(served)
    assert accepted.code == 0, accepted.stderr
    by_class = _submit_class(served)
    assert by_class.code == 0, by_class.stderr
    for job in (accepted.stdout.strip().split(";")[0], by_class.json()["short_id"]):  # type: ignore[index]
        assert run_one(Call("alice", ("cancel", job)), served.api, served.folder).code == 0

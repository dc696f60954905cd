"""Array elements through the API and the CLI: JOB_3 / JOB_[1-3] in status, explain, cancel, msqueue and mscancel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.sbatch.mscancel import main as mscancel
from cli.sbatch.msqueue import main as msqueue
from meta.model.errors import InvalidRequest, NotFound
from meta.model.states import TaskState
from meta.service.api import Service
from meta.service.operations import Operations
from meta.store.models import Task
from tenants.identity import member
from tests.api_support import RunningApi
from tests.cli.test_msqueue_mscancel import _running, _waiting
from tests.runtime.support import training

ALICE = 1001
ALICES = member("alice", ALICE, ["tenant-a"])


def _cli(api: RunningApi, tmp_path: Path, prog: Any, *args: str) -> Result:
    cred = tmp_path / "cred"
    cred.write_text(f"uid={ALICE}\n")
    env = {"METASCHED_API": api.address, "METASCHED_CREDENTIAL_FILE": str(cred), "METASCHED_DB": None,
           "METASCHED_DB_FILE": None}  # fmt: skip
    result = CliRunner().invoke(prog, list(args), env=env)
    assert "Traceback" not in result.output, result.output
    return result


def _array(service: Service, indexes: list[int], throttle: int | None = 2) -> tuple[str, dict[str, str]]:
    """_array submits alice's array job; its short id and its task ids by element index."""
    spec = training("sweep", tenant="tenant-a", array={"indexes": indexes, "max_parallel": throttle})
    job = service.submit(spec, principal=ALICES).job
    with service.db.session() as session:
        tasks = session.query(Task).filter(Task.job_id == job.id).all()
        return job.short_id, {t.name: t.id for t in tasks}


def _states(service: Service, tasks: dict[str, str]) -> dict[str, str]:
    with service.db.session() as session:
        return {name: session.get(Task, task_id).state for name, task_id in tasks.items()}


def test_status_and_explain_of_an_element_show_only_it(service: Service) -> None:
    job, tasks = _array(service, [0, 1, 2, 3])
    _waiting(service, job, tasks["3"], "JobArrayTaskLimit")
    ops = Operations(service, ALICES)
    assert [t["name"] for t in ops.status(f"{job}_3")["task_list"]] == ["3"]
    assert [t["name"] for t in ops.status(f"{job}_[1-2]")["task_list"]] == ["1", "2"]
    assert [(t["name"], t["code"]) for t in ops.explain(f"{job}_3")["tasks"]] == [("3", "JobArrayTaskLimit")]
    assert len(ops.status(job)["task_list"]) == 4
    with pytest.raises(NotFound, match=f"job {job}_9 not found"):
        ops.status(f"{job}_9")


def test_cancel_of_elements_ends_only_them_and_the_job_state_follows(service: Service) -> None:
    job, tasks = _array(service, [0, 1, 2, 3, 4])
    _running(service, tasks["0"], "7000", ("node1",))
    ops = Operations(service, ALICES)
    ops.cancel(f"{job}_4")
    ops.cancel(f"{job}_[1-2]")
    status = ops.cancel(f"{job}_0")  # launched: its attempt is stopped through scancel
    states = _states(service, tasks)
    assert states == {"0": "running", "1": "cancelled", "2": "cancelled", "3": "pending", "4": "cancelled"}
    assert status["state"] == "running" and status["cancel_requested"] is False
    assert [a["state"] for t in status["task_list"] if t["name"] == "0" for a in t["attempts"]] == ["stopping"]


def test_an_element_id_of_a_plain_job_is_refused(service: Service) -> None:
    job = service.submit(training("plain", tenant="tenant-a"), principal=ALICES).job.short_id
    with pytest.raises(InvalidRequest, match="is not an array"):
        Operations(service, ALICES).cancel(f"{job}_0")


def test_msqueue_collapses_waiting_elements_and_shows_running_ones(service: Service, api: RunningApi,
                                                                  tmp_path: Path) -> None:  # fmt: skip
    job, tasks = _array(service, [1, 2, 3, 4, 5, 6, 7])
    _running(service, tasks["1"], "7001", ("node1",))
    _waiting(service, job, tasks["2"], "JobArrayTaskLimit")
    out = _cli(api, tmp_path, msqueue, "-h", "-o", "%i %t %F %K %R")
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines() == [f"{job}_[2-7%2] PD {job} 2-7%2 (JobArrayTaskLimit)", f"{job}_1 R {job} 1 node1"]
    assert _cli(api, tmp_path, msqueue, "-h", "-o", "%i", "-j", f"{job}_1").stdout.split() == [f"{job}_1"]


def test_mscancel_takes_an_element_a_range_and_the_whole_array(service: Service, api: RunningApi,
                                                               tmp_path: Path) -> None:  # fmt: skip
    job, tasks = _array(service, [0, 1, 2, 3, 4, 5])
    assert _cli(api, tmp_path, mscancel, f"{job}_4").exit_code == 0
    assert _cli(api, tmp_path, mscancel, f"{job}_[1-2]").exit_code == 0
    assert [n for n, s in _states(service, tasks).items() if s == TaskState.CANCELLED.value] == ["1", "2", "4"]
    missing = _cli(api, tmp_path, mscancel, f"{job}_9")
    assert missing.exit_code == 1 and "Invalid job id specified" in missing.stderr
    assert _cli(api, tmp_path, mscancel, job).exit_code == 0
    assert set(_states(service, tasks).values()) == {TaskState.CANCELLED.value}


def test_retry_of_an_element_retries_only_it(service: Service) -> None:
    job, tasks = _array(service, [0, 1, 2])
    ops = Operations(service, ALICES)
    ops.cancel(f"{job}_[0-1]")
    assert [t["name"] for t in ops.retry(f"{job}_1")] == ["1"]
    assert _states(service, tasks) == {"0": "cancelled", "1": "pending", "2": "pending"}


def test_mscancel_takes_an_element_list_with_commas(service: Service, api: RunningApi, tmp_path: Path) -> None:
    job, tasks = _array(service, [0, 1, 2, 3])
    assert _cli(api, tmp_path, mscancel, f"{job}_[0,3]").exit_code == 0
    assert [n for n, s in _states(service, tasks).items() if s == TaskState.CANCELLED.value] == ["0", "3"]


def test_elements_are_offered_to_the_policy_in_index_order(service: Service) -> None:
    # the policy breaks ties by task id: ascending ids make a throttled array start 0, 1, ... as Slurm
    _, tasks = _array(service, list(range(12)))
    assert [tasks[str(i)] for i in range(12)] == sorted(tasks.values())

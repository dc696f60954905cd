"""An array element's launch: SLURM_ARRAY_* as sbatch sets them, %A/%a expanded, sbatch's array default output."""

from __future__ import annotations

from meta.cycle.actuate.launch_plan import LaunchSettings, launch_request
from meta.model.spec import AnySpec
from meta.store.models import Attempt, Job, Task
from slurm_bridge.render import render
from tests.runtime.support import evaluation, share, training

ATTEMPT_ID = "0f6c1a2e-7a3b-4c1d-9e2f-000000000001"
SETTINGS = LaunchSettings(log_dir="/var/log/ms/", grace_s=90, daemon_uid=0, site="s1")


def _request(spec: AnySpec, index: int, owner_uid: int | None = 2001):
    job = Job(id="job-uuid", short_id="j42", tenant=spec.tenant, kind=spec.kind.value, name=spec.name,
              owner_uid=owner_uid, owner_gid=owner_uid, submit_dir="/home/alice/proj")  # fmt: skip
    task = Task(id="task-uuid", name=str(index), index=0)
    attempt = Attempt(id=ATTEMPT_ID, number=1, fencing_token=1, placement=[share("node1", gpus=1)])
    return launch_request(job, task, attempt, spec, SETTINGS)


def test_an_element_gets_sbatchs_array_variables_with_the_jobs_id() -> None:
    request = _request(training(array={"indexes": [0, 2, 4, 6], "max_parallel": 2, "step": 2}), 4)
    assert {k: v for k, v in request.env.items() if k.startswith("SLURM_ARRAY")} == {
        "SLURM_ARRAY_JOB_ID": "j42", "SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4",
        "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "6", "SLURM_ARRAY_TASK_STEP": "2",
    }  # fmt: skip
    assert "export SLURM_ARRAY_TASK_ID=4" in render(request)


def test_without_output_an_element_writes_sbatchs_array_default_in_its_folder() -> None:
    request = _request(evaluation(array={"indexes": [3, 5]}), 5)
    assert (request.stdout, request.sbatch_default_output) == ("slurm-j42_5.out", False)
    assert "#SBATCH --output=slurm-j42_5.out" in render(request)


def test_the_daemons_own_array_jobs_keep_the_daemons_log() -> None:
    request = _request(training(array={"indexes": [1]}), 1, owner_uid=None)
    assert request.stdout == f"/var/log/ms/j42/{ATTEMPT_ID}.out"


def test_a_job_that_is_not_an_array_gets_no_array_variables() -> None:
    request = _request(training(), 0)
    assert not [k for k in request.env if k.startswith("SLURM_ARRAY")] and request.sbatch_default_output


def test_an_elements_own_output_patterns_get_the_array_id_and_index_and_keep_the_rest_for_slurm() -> None:
    spec = training(array={"indexes": [0, 3]}, sbatch={"output": "/home/alice/proj/logs/%x-%A_%a.out",
                                                       "error": "/home/alice/proj/logs/%j-%3a.err"})  # fmt: skip
    request = _request(spec, 3)
    assert request.stdout == "/home/alice/proj/logs/%x-j42_3.out"
    assert request.stderr == "/home/alice/proj/logs/%j-003.err"

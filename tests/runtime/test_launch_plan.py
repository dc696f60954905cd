"""launch_request: gang shapes (one component or a het-job), inference staging, environment, settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from meta.cycle.actuate.launch_plan import LaunchSettings, launch_request, staging_dir
from meta.model.kinds import JobKind
from meta.model.spec import AnySpec
from meta.store.models import Attempt, Job, Task
from slurm_bridge.fake import parse_script
from slurm_bridge.render import render
from tests.runtime.support import checkpointing, inference, share, training

ATTEMPT_ID = "0f6c1a2e-7a3b-4c1d-9e2f-000000000001"
SETTINGS = LaunchSettings(log_dir="/var/log/ms/", grace_s=90, api_address="unix:///run/metasched/api.sock", site="s1")
SECRET = "s3cr3t-attempt-secret-0123456789abcdef_XYZ"


def _request(spec: AnySpec, placement: list[dict], task_name: str = "0", resume: str | None = None):
    job = Job(id="job-uuid", short_id="j42", tenant=spec.tenant, kind=spec.kind.value, name=spec.name)
    task = Task(id="task-uuid", name=task_name, index=0)
    attempt = Attempt(id=ATTEMPT_ID, number=2, fencing_token=5, placement=placement)
    return launch_request(job, task, attempt, spec, SETTINGS, resume_from=resume, attempt_secret=SECRET)


def test_even_gang_is_one_component_with_ntasks_per_node() -> None:
    spec = training(workers=4)
    placement = [share("node1"), share("node2"), share("node1"), share("node2")]
    request = _request(spec, placement)
    assert request.roles == ()
    assert request.num_nodes == 2 and request.nodes == ("node1", "node2")
    assert request.ntasks_per_node == 2
    assert request.per_node.gpus == 4 and request.per_node.cpus == 8 and request.per_node.memory_mib == 32768
    assert request.command == "python train.py"


def test_one_worker_per_node_gang() -> None:
    request = _request(training(workers=3), [share("node3"), share("node1"), share("node2")])
    assert request.roles == () and request.ntasks_per_node == 1
    assert request.nodes == ("node1", "node2", "node3") and request.per_node.gpus == 2


def test_uneven_placement_is_a_het_job_with_one_role_per_shape() -> None:
    spec = training(workers=4)
    placement = [share("node1"), share("node1"), share("node1"), share("node2")]
    request = _request(spec, placement)
    assert len(request.roles) == 2
    by_workers = {role.ntasks_per_node: role for role in request.roles}
    assert set(by_workers) == {1, 3}
    assert by_workers[3].nodes == ("node1",) and by_workers[3].per_node.gpus == 6
    assert by_workers[1].nodes == ("node2",) and by_workers[1].per_node.gpus == 2
    assert all(role.command == "python train.py" and role.num_nodes == 1 for role in request.roles)
    assert request.command is None and request.script is None
    name, comment, account, components = parse_script(render(request))
    assert name == "train" and f"attempt={ATTEMPT_ID}" in comment and account == "acme"
    assert sorted(components) == [("node1",), ("node2",)]


def test_inference_gets_staging_output_dir_and_array_task_id(tmp_path) -> None:
    spec = inference(str(tmp_path / "out"), partitions=["shard-a", "shard-b"])
    request = _request(spec, [share("node1", gpus=1)], task_name="shard-b")
    assert request.kind == JobKind.INFERENCE
    want = str(tmp_path / "out" / "j42" / "_attempts" / ATTEMPT_ID)  # under the job's own folder
    assert request.output_dir == staging_dir(spec, "j42", ATTEMPT_ID) == want
    assert request.env["SLURM_ARRAY_TASK_ID"] == "shard-b"
    assert request.task_name == "shard-b" and request.checkpoint_dir is None


def test_inference_keeps_a_user_array_task_id(tmp_path) -> None:
    spec = inference(str(tmp_path / "out"), env={"SLURM_ARRAY_TASK_ID": "7"})
    assert _request(spec, [share("node1", gpus=1)], task_name="1").env["SLURM_ARRAY_TASK_ID"] == "7"


def test_training_carries_checkpoint_resume_and_settings() -> None:
    spec = checkpointing(ckpt_dir="/ckpt/run")
    request = _request(spec, [share("node1")], resume="/ckpt/run/step-30")
    assert request.checkpoint_dir == "/ckpt/run" and request.resume_from == "/ckpt/run/step-30"
    assert request.output_dir is None and "SLURM_ARRAY_TASK_ID" not in request.env
    assert request.api_address == "unix:///run/metasched/api.sock" and request.attempt_secret == SECRET
    assert request.grace_s == 90
    assert request.stdout == f"/var/log/ms/j42/{ATTEMPT_ID}.out"
    assert (request.attempt_id, request.attempt_number, request.fencing_token) == (ATTEMPT_ID, 2, 5)
    assert (request.job_id, request.task_id, request.tenant, request.job_name) == ("job-uuid", "task-uuid", "acme", "j42")
    script = render(request)
    assert "export METASCHED_API=unix:///run/metasched/api.sock" in script
    assert f"export METASCHED_ATTEMPT_SECRET={SECRET}" in script and "export METASCHED_FENCING_TOKEN=5" in script
    assert "--signal=B:USR1@90" in script


def test_no_store_url_and_no_credential_in_squeue_fields() -> None:
    request = _request(training(env={"MODE": "x"}), [share("node1")])
    script = render(request)
    assert "METASCHED_DB" not in script and "postgresql" not in script and "sqlite" not in script
    name, comment, _, _ = parse_script(script)
    # Slurm shows the user's job name (sbatch -J); the tag is the comment: an id, no token
    assert name == "train" and comment == f"metasched:site=s1:attempt={ATTEMPT_ID}"
    sbatch_lines = [line for line in script.splitlines() if line.startswith("#")]
    assert not any(SECRET in line for line in sbatch_lines)  # only in the export, never an option or comment
    assert sum(SECRET in line for line in script.splitlines()) == 1


def test_no_api_and_no_secret_by_default() -> None:
    job = Job(id="job-uuid", short_id="j42", tenant="acme", kind="training")
    task = Task(id="task-uuid", name="0", index=0)
    attempt = Attempt(id=ATTEMPT_ID, number=1, fencing_token=1, placement=[share("node1")])
    request = launch_request(job, task, attempt, training(), LaunchSettings(site="s1"))
    script = render(request)
    assert parse_script(script)[0] == f"ms-{ATTEMPT_ID}"  # a job without a name keeps the legacy tag name
    assert request.api_address is None and "METASCHED_API" not in script and "METASCHED_ATTEMPT_SECRET" not in script


def test_only_a_training_job_with_a_checkpoint_is_sent_the_checkpoint_signal() -> None:
    plain = _request(training(), [share("node1")])
    assert not plain.checkpoints and "--signal" not in render(plain)
    uneven = [share("node1"), share("node1"), share("node2")]
    assert "--signal" not in render(_request(training(workers=3), uneven))
    declared = _request(checkpointing(workers=3), uneven)
    assert declared.checkpoints and declared.roles and "#SBATCH --signal=B:USR1@90\n" in render(declared)


def test_the_checkpoint_grace_fits_a_short_time_limit() -> None:
    request = _request(checkpointing(time_limit="2m"), [share("node1")])
    assert request.grace_s == 90 and "#SBATCH --signal=B:USR1@12\n" in render(request)


def test_job_logs_default_to_the_users_state_folder_not_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert LaunchSettings().log_dir == str(tmp_path / "metasched" / "logs")
    assert not LaunchSettings().log_dir.startswith("/tmp/metasched")

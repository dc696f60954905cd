"""What an sbatch job's ``sbatch:`` section adds to its launch (meta.cycle.actuate.sbatch_launch) and how render writes it."""

from __future__ import annotations

from types import SimpleNamespace

from meta.cycle.actuate.sbatch_launch import sbatch_env, sbatch_request_fields, working_dir
from meta.model.kinds import JobKind
from meta.model.spec import spec_from_dict
from slurm_bridge.launch import LaunchRequest
from slurm_bridge.render import render

JOB = SimpleNamespace(submit_dir="/home/alice/proj")


def _spec(**sbatch):  # type: ignore[no-untyped-def]
    return spec_from_dict({"kind": "training", "name": "run.sh", "tenant": "tenant-a", "resources": {"cpus": 8},
                           "script": "#!/bin/bash\nsrun hostname\n", "dependency": "afterok:j4k9x2m7",
                           "sbatch": sbatch})  # fmt: skip


def _sbatch_lines(spec) -> list[str]:  # type: ignore[no-untyped-def]
    request = LaunchRequest(attempt_id="a1", attempt_number=1, fencing_token=1, job_id="j", task_id="t",
                            tenant="tenant-a", kind=JobKind.TRAINING, time_limit_s=60, site="s1", script=spec.script,
                            per_node=spec.worker_resources(), env=sbatch_env(JOB, spec),
                            **sbatch_request_fields(JOB, spec, True))  # fmt: skip
    return [line for line in render(request).splitlines() if line.startswith(("#SBATCH", "export SLURM"))]


def test_the_users_options_and_layout_reach_slurm() -> None:
    spec = _spec(output="out-%j.log", open_mode="append", mail_type="END", exclusive=True, constraint="a100|h100",
                 export="NONE", ntasks=4, cpus_per_task=2)  # fmt: skip
    lines = _sbatch_lines(spec)
    for option in ("--output=out-%j.log", "--open-mode=append", "--mail-type=END", "--exclusive",
                   "--constraint=a100|h100", "--export=NONE", "--ntasks=4", "--cpus-per-task=2"):  # fmt: skip
        assert f"#SBATCH {option}" in lines, lines
    assert not any("--ntasks-per-node" in line for line in lines)  # the user's layout, not metasched's
    assert "export SLURM_SUBMIT_DIR=/home/alice/proj" in lines
    assert "export SLURM_JOB_DEPENDENCY=afterok:j4k9x2m7" in lines


def test_defaults_are_sbatchs() -> None:
    spec = _spec()
    lines = _sbatch_lines(spec)
    assert not any(line.startswith(("#SBATCH --output", "#SBATCH --ntasks", "#SBATCH --cpus")) for line in lines)
    assert working_dir(JOB, spec) == "/home/alice/proj"
    assert working_dir(JOB, _spec(chdir="/scratch/x")) == "/scratch/x"

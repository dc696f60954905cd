"""sbatch rendering: golden files, quoting of user input, secrets by name only, validation.

Set METASCHED_UPDATE_GOLDEN=1 to rewrite tests/golden/sbatch/*.sbatch from the current renderer.
"""

import os
import shlex
import subprocess

import pytest

from meta.model.kinds import JobKind
from meta.model.resources import ResourceVector
from slurm_bridge.launch import LaunchRequest, LaunchRequestError, Role
from slurm_bridge.render import checkpoint_grace_s, format_time_limit, render

ATTEMPT = "3f2a9c1e-7b4d-4c1a-9e0f-2b8d5a6c7e10"
SITE = "k3x9m2q7r4vd"


def request(**changes) -> LaunchRequest:
    """request is a small evaluation attempt; tests change what they need."""
    fields = dict(
        attempt_id=ATTEMPT,
        attempt_number=1,
        fencing_token=42,
        job_id="job-7f3e",
        task_id="job-7f3e/0",
        tenant="tenant-a",
        kind=JobKind.EVALUATION,
        time_limit_s=1800,
        site=SITE,
        command="python eval.py --model /models/m1",
        per_node=ResourceVector(cpus=4, memory="16G", gpus=1, gpu_type="t4"),
    )
    fields.update(changes)
    return LaunchRequest(**fields)


GOLDEN_CASES = {
    "training_gang": request(
        kind=JobKind.TRAINING,
        time_limit_s=4 * 3600,
        command="python -m torch.distributed.run --nnodes=2 train.py --config cfg.yaml",
        per_node=ResourceVector(cpus=32, memory="200G", gpus=8, gpu_type="a100"),
        num_nodes=2,
        nodes=("a100n2", "a100n1"),
        qos="normal",
        partition="a100",
        env={"NCCL_DEBUG": "INFO", "WANDB_PROJECT": "llm-pretrain"},
        secret_names=("WANDB_API_KEY",),
        job_name="llama-7b pretrain",
        slurm_name="llama-7b",
        checkpoint_dir="/ckpt/tenant-a/job-7f3e",
        checkpoints=True,
        output_dir="/out/tenant-a/job-7f3e",
        resume_from="/ckpt/tenant-a/job-7f3e/step-1000",
        grace_s=120,
        attempt_number=3,
    ),
    "inference_t4": request(
        kind=JobKind.INFERENCE,
        task_id="job-9a1b/partition-0007",
        job_id="job-9a1b",
        command="python infer.py --shard 7",
        per_node=ResourceVector(cpus=8, memory="32G", gpus=1, gpu_type="t4"),
        nodes=("t4n1",),
        partition="t4",
        qos="low",
        output_dir="/out/tenant-b/job-9a1b/partition-0007",
        tenant="tenant-b",
    ),
    "evaluation": request(stdout="/logs/eval-%j.out", stderr="/logs/eval-%j.err"),
    "hetjob": request(
        kind=JobKind.TRAINING,
        command=None,
        per_node=ResourceVector(),
        qos="high",
        roles=(
            Role(
                "trainer",
                ResourceVector(cpus=8, memory="64G", gpus=4, gpu_type="h100"),
                "python trainer.py",
                nodes=("h100n1",),
                partition="h100",
            ),
            Role(
                "evaluator",
                ResourceVector(cpus=2, memory="8G", gpus=1, gpu_type="t4"),
                "python evaluator.py",
                nodes=("t4n1",),
                partition="gpu",
            ),
        ),
        grace_s=60,
    ),
    "reservation": request(
        kind=JobKind.TRAINING,
        per_node=ResourceVector(cpus=16, memory="128G", gpus=8, gpu_type="h100"),
        num_nodes=2,
        nodes=("h100n1", "h100n2"),
        reservation="ms-hold-job-7f3e-0",
        command="python train.py",
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden(name, golden_dir):
    rendered = render(GOLDEN_CASES[name])
    path = golden_dir / f"{name}.sbatch"
    if os.environ.get("METASCHED_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rendered)
    assert path.exists(), f"{path} missing: run with METASCHED_UPDATE_GOLDEN=1"
    assert rendered == path.read_text()


def directives(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]


def test_training_gang_directives():
    lines = directives(render(GOLDEN_CASES["training_gang"]))
    for expected in (
        "--job-name=llama-7b",  # the user's name; metasched's tag is the comment
        f"--comment=metasched:site={SITE}:attempt={ATTEMPT}",
        "--account=tenant-a",
        "--qos=normal",
        "--partition=a100",
        "--nodes=2",
        "--nodelist=a100n[1-2]",
        "--ntasks-per-node=1",
        "--cpus-per-task=32",
        "--mem=200G",
        "--gres=gpu:a100:8",
        "--time=0-04:00:00",
        "--no-requeue",
        "--signal=B:USR1@120",
    ):
        assert expected in lines


def signal_lines(script: str) -> list[str]:
    return [line for line in directives(script) if line.startswith("--signal")]


def test_only_training_gets_the_checkpoint_signal():
    assert not signal_lines(render(GOLDEN_CASES["inference_t4"]))


@pytest.mark.parametrize("name", ["hetjob", "reservation"])
def test_training_that_does_not_checkpoint_gets_no_signal(name):
    # a program that does not trap USR1 dies of it (exit 138): only a declared checkpoint asks for it
    assert GOLDEN_CASES[name].kind == JobKind.TRAINING and not GOLDEN_CASES[name].checkpoints
    assert not signal_lines(render(GOLDEN_CASES[name]))


def test_a_checkpointing_training_job_gets_the_signal_with_the_site_grace():
    script = render(request(kind=JobKind.TRAINING, checkpoints=True, time_limit_s=3600, grace_s=60))
    assert signal_lines(script) == ["--signal=B:USR1@60"]


@pytest.mark.parametrize(
    ("time_limit_s", "grace_s", "expected"),
    [
        (600, 60, 60),  # from a 10-minute limit up, the site's grace is kept
        (601, 60, 60),
        (599, 60, 59),  # just below: a tenth of the limit
        (120, 60, 12),  # msbatch -t 2: signalled at most 12 s (+ Slurm's up to 60 s) early
        (86400, 60, 60),
        (3600, 0, 0),
    ],
)
def test_checkpoint_grace_is_at_most_a_tenth_of_the_time_limit(time_limit_s, grace_s, expected):
    assert checkpoint_grace_s(grace_s, time_limit_s) == expected


@pytest.mark.parametrize(("time_limit_s", "expected"), [(9, []), (10, ["--signal=B:USR1@1"])])
def test_no_signal_when_the_capped_grace_is_under_a_second(time_limit_s, expected):
    script = render(request(kind=JobKind.TRAINING, checkpoints=True, time_limit_s=time_limit_s, grace_s=60))
    assert signal_lines(script) == expected


def test_hetjob_has_a_separator_per_extra_role():
    lines = directives(render(GOLDEN_CASES["hetjob"]))
    assert lines.count("hetjob") == 1
    separator = lines.index("hetjob")
    assert "--gres=gpu:h100:4" in lines[:separator] and "--gres=gpu:t4:1" in lines[separator:]
    assert "--account=tenant-a" in lines[separator:]


def test_user_input_is_quoted_and_cannot_escape(tmp_path):
    evil = "x'; touch " + str(tmp_path / "pwned") + "; echo '"
    script = render(
        request(
            job_name=f"name; rm -rf / {evil}",
            task_id=f"t\ntouch {tmp_path / 'pwned3'}",
            env={"EVIL": f"$(touch {tmp_path / 'pwned2'}) {evil}"},
            command=f"printf '%s\\n' {shlex.quote(evil)} > {tmp_path / 'out'}",
        )
    )
    assert f"export METASCHED_JOB_NAME={shlex.quote(f'name; rm -rf / {evil}')}" in script
    # Run everything except the exec line in a real shell: nothing may be executed.
    body = "\n".join(line for line in script.splitlines() if not line.startswith("exec "))
    env_dump = subprocess.run(
        ["bash", "-c", body + '\nprintf "%s\\n%s" "$METASCHED_JOB_NAME" "$EVIL"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert env_dump.splitlines()[0] == f"name; rm -rf / {evil}"
    assert not any((tmp_path / name).exists() for name in ("pwned", "pwned2", "pwned3"))


def test_command_runs_as_one_bash_c_argument(tmp_path):
    script = render(request(command=f"echo one > {tmp_path / 'a'}; echo two >> {tmp_path / 'a'}"))
    launch = script.splitlines()[-1]
    assert launch.startswith("exec bash -c '")
    subprocess.run(["bash", "-c", script], check=True, env={"PATH": os.environ["PATH"]})
    assert (tmp_path / "a").read_text() == "one\ntwo\n"


def test_secret_values_never_appear():
    secrets = {"WANDB_API_KEY": "wandb-0123456789abcdef", "HF_TOKEN": "hf_SuperSecretValue"}
    script = render(request(secret_names=tuple(secrets), env={"MODE": "fast"}))
    for value in secrets.values():
        assert value not in script
    assert "export METASCHED_SECRET_NAMES=WANDB_API_KEY,HF_TOKEN" in script


@pytest.mark.parametrize(
    "changes",
    [
        {"tenant": "tenant-a --qos=high"},
        {"partition": "a100\n#SBATCH --account=other"},
        {"reservation": "r 1"},
        {"stdout": "/logs/my file.out"},
        {"attempt_id": "a b"},
        {"env": {"BAD NAME": "x"}},
        {"env": {"METASCHED_ATTEMPT_ID": "spoofed"}},
        {"secret_names": ("HF_TOKEN",), "env": {"HF_TOKEN": "value"}},
        {"command": None},
        {"script": "echo both"},
        {"nodes": ("a100n1", "a100n2")},
        {"num_nodes": 0},
        {"time_limit_s": 0},
        # fullmatch: a bare "$" would let a value end in a newline
        {"partition": "a100\n"},
        {"stdout": "/logs/x.out\n"},
        {"slurm_name": "train\n#SBATCH --uid=0"},
        {"slurm_name": "my job"},
        {"env": {"NAME\n": "x"}},
        {"secret_names": ("HF_TOKEN\n",)},
        # only training jobs checkpoint (and get the checkpoint signal)
        {"checkpoints": True},
    ],
)
def test_unsafe_or_inconsistent_requests_are_rejected(changes):
    with pytest.raises(LaunchRequestError):
        request(**changes)


def test_script_entrypoint():
    user_script = "#!/bin/bash\nset -e\npython eval.py\n"
    script = render(request(command=None, script=user_script))
    assert script.endswith("exec bash -c " + shlex.quote(user_script) + "\n")


@pytest.mark.parametrize(
    ("seconds", "text"), [(60, "0-00:01:00"), (93784, "1-02:03:04"), (1800, "0-00:30:00")]
)
def test_time_limit(seconds, text):
    assert format_time_limit(seconds) == text


def test_role_name_with_a_trailing_newline_is_rejected():
    with pytest.raises(LaunchRequestError):
        Role("trainer\n", ResourceVector(cpus=1), "python trainer.py")

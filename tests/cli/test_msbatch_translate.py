"""Tests of the sbatch → JobSpec translation rules (kind, shape, resources, identity, env)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.sbatch.msbatch import prepare
from cli.sbatch.options import SbatchError, parse_command_line
from cli.sbatch.script import bind_arguments, check_script, interpreter
from cli.sbatch.translate import Translation, sanitise_name
from meta.model.spec import EvaluationSpec, InferenceSpec, TrainingSpec

CWD = "/home/alice/proj"
BODY = "srun python job.py\n"


def _run(tmp_path: Path, directives: list[str], *argv: str, env: dict[str, str] | None = None) -> Translation:
    """_run writes a script with ``directives`` and translates ``msbatch ARGV script``."""
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {d}\n" for d in directives) + BODY)
    words = [str(script) if word == "{script}" else word for word in argv]
    if str(script) not in words:
        words.append(str(script))
    return prepare(parse_command_line(words), env or {}, CWD).translation


def _error(tmp_path: Path, directives: list[str], *argv: str) -> str:
    with pytest.raises(SbatchError) as caught:
        _run(tmp_path, directives, *argv)
    return "\n".join(caught.value.problems)


# --- kind -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("directives", "argv", "want_kind", "want_workers"),
    [
        pytest.param(["-A t"], [], TrainingSpec, 1, id="single-node-defaults-to-training"),
        pytest.param(["-A t", "-N 4"], [], TrainingSpec, 4, id="multi-node-is-training"),
        pytest.param(["-A t"], ["--kind=evaluation"], EvaluationSpec, None, id="kind-evaluation"),
        pytest.param(["-A t", "--kind=evaluation"], [], EvaluationSpec, None, id="kind-in-a-directive"),
        pytest.param(["-A t", "--array=0-3"], [], TrainingSpec, 1, id="array-is-training"),
        pytest.param(["-A t", "-N 2", "--array=0-3"], [], TrainingSpec, 2, id="array-of-gangs"),
        pytest.param(["-A t", "--array=0-3"], ["--kind=evaluation"], EvaluationSpec, None, id="array-of-evaluations"),
        pytest.param(
            ["-A t", "--array=0-3"], ["--kind", "inference"], InferenceSpec, None, id="array-kind-agree"
        ),
    ],
)
def test_kind_rules(
    tmp_path: Path, directives: list[str], argv: list[str], want_kind: type, want_workers: int | None
) -> None:
    spec = _run(tmp_path, directives, *argv).spec
    assert isinstance(spec, want_kind)
    if want_workers is not None:
        assert spec.workers_per_task() == want_workers


@pytest.mark.parametrize(
    ("directives", "argv", "want_message"),
    [
        pytest.param(
            ["-A t"], ["--kind=inference"], "--kind=inference needs --array", id="inference-no-array"
        ),
        pytest.param(
            ["-A t", "-N 2"], ["--kind=evaluation"], "only training spans nodes", id="multinode-eval"
        ),
        pytest.param(
            ["-A t", "-N 2", "--array=1-2"], ["--kind=inference"], "only training spans nodes", id="multinode-array"
        ),
        pytest.param(
            ["-A t", "--kind=serving"], [], "invalid --kind=serving (in #SBATCH line 3)", id="bad-kind"
        ),
    ],
)
def test_kind_errors(tmp_path: Path, directives: list[str], argv: list[str], want_message: str) -> None:
    assert want_message in _error(tmp_path, directives, *argv)


# --- resources ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("directives", "want"),
    [
        pytest.param([], {"cpus": 1, "memory_mib": 0, "gpus": 0, "gpu_type": None}, id="defaults"),
        pytest.param(["-n 8", "-c 4"], {"cpus": 32}, id="ntasks-on-one-node"),
        pytest.param(["-N 2", "-n 8", "-c 2"], {"cpus": 8}, id="ntasks-split-over-nodes"),
        pytest.param(["-N 2", "-n 8", "--ntasks-per-node=4"], {"cpus": 4}, id="ntasks-consistent"),
        pytest.param(["-c 4", "--mem-per-cpu=2G"], {"memory_mib": 8192}, id="mem-per-cpu"),
        pytest.param(
            ["--gres=gpu:2", "--mem-per-gpu=40G"], {"memory_mib": 81920, "gpus": 2}, id="mem-per-gpu"
        ),
        pytest.param(["-N 2", "--gpus=a100:8"], {"gpus": 4, "gpu_type": "a100"}, id="gpus-total-split"),
        pytest.param(["-N 2", "--gpus-per-node=H100:8"], {"gpus": 8, "gpu_type": "h100"}, id="gpus-per-node"),
        pytest.param(["--gres=gpu:a100"], {"gpus": 1, "gpu_type": "a100"}, id="gres-type-only"),
    ],
)
def test_worker_resources(tmp_path: Path, directives: list[str], want: dict) -> None:
    resources = _run(tmp_path, ["-A t", *directives]).spec.worker_resources()
    assert {name: getattr(resources, name) for name in want} == want


@pytest.mark.parametrize(
    ("directives", "want_message"),
    [
        pytest.param(
            ["-N 2", "-n 5"],
            "--ntasks=5 (in #SBATCH line 4) does not divide evenly over 2 nodes",
            id="ntasks",
        ),
        pytest.param(
            ["-N 2", "-n 6", "--ntasks-per-node=4"], "disagrees with --ntasks-per-node=4", id="inconsistent"
        ),
        pytest.param(
            ["-N 4", "--gpus=6"], "--gpus=6 (in #SBATCH line 4) does not divide evenly over 4", id="gpus"
        ),
        pytest.param(["--mem-per-gpu=10G"], "needs GPUs", id="mem-per-gpu-without-gpus"),
        pytest.param(["--gres=gpu:a100:x"], "invalid --gres=gpu:a100:x (in #SBATCH line 3)", id="bad-gres"),
        pytest.param(["--gres=nvme:100"], "only gpu GRES is supported", id="other-gres"),
        pytest.param(
            ["--time=forever"], "invalid --time=forever (in #SBATCH line 3): cannot parse", id="bad-time"
        ),
        pytest.param(["--mem=0"], "invalid --mem=0", id="whole-node-memory"),
        pytest.param(["-N 2-4"], "node ranges", id="node-range"),
        pytest.param(["-p a,b"], "give one partition", id="partition-list"),
        pytest.param(["--signal=USR9"], "invalid --signal=USR9", id="bad-signal"),
    ],
)
def test_value_errors_name_the_option_and_line(
    tmp_path: Path, directives: list[str], want_message: str
) -> None:
    assert want_message in _error(tmp_path, ["-A t", *directives])


def test_command_line_value_error_says_so(tmp_path: Path) -> None:
    assert "invalid --time=x (on the command line)" in _error(tmp_path, ["-A t"], "-t", "x")


# --- identity -------------------------------------------------------------------------------


def test_account_is_required_with_a_hint(tmp_path: Path) -> None:
    assert "no account: give -A/--account=<tenant>" in _error(tmp_path, ["-N 1"])


def test_account_from_the_environment(tmp_path: Path) -> None:
    assert _run(tmp_path, [], env={"SBATCH_ACCOUNT": "envtenant"}).spec.tenant == "envtenant"


def test_an_invalid_tenant_is_reported_by_the_spec(tmp_path: Path) -> None:
    assert "invalid job: tenant:" in _error(tmp_path, ["-A 'bad tenant!'"])


def test_name_defaults_to_the_script_file_name(tmp_path: Path) -> None:
    assert _run(tmp_path, ["-A t"]).spec.name == "job.sh"  # as sbatch names it (squeue, %x)


@pytest.mark.parametrize(
    ("raw", "want"),
    [("my job!", "my-job"), ("..hidden", "hidden"), ("ok_name-1.2", "ok_name-1.2"), ("!!!", "msbatch-job")],
)
def test_sanitise_name(raw: str, want: str) -> None:
    assert sanitise_name(raw) == want


def test_carried_fields(tmp_path: Path) -> None:
    spec = _run(tmp_path, ["-A t", "-p gpu", "--qos=low", "-t 1-00:00"]).spec
    assert (spec.partition, spec.qos, spec.time_limit_s) == ("gpu", "low", 86400.0)


def test_time_defaults_to_the_spec_default(tmp_path: Path) -> None:
    assert _run(tmp_path, ["-A t"]).spec.time_limit_s == 3600.0


# --- inference output -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("directives", "want_output", "want_note"),
    [
        pytest.param([], "/home/alice/proj/msbatch-out/job.sh", None, id="default"),
        pytest.param(["-o /scratch/run/%A_%a.out"], "/scratch/run", None, id="output-dir"),
        pytest.param(["-o logs/%x/%a.out"], "/home/alice/proj/logs/job.sh", None, id="job-name-expanded"),
        pytest.param(
            ["-o /s/%u/%a.out"], "/home/alice/proj/msbatch-out/job.sh", "has a % pattern", id="fallback"
        ),
        pytest.param(["-o slurm-%A_%a.out"], "/home/alice/proj", None, id="no-directory-part"),
    ],
)
def test_inference_output(
    tmp_path: Path, directives: list[str], want_output: str, want_note: str | None
) -> None:
    translation = _run(tmp_path, ["-A t", "--array=0-1", "--kind=inference", *directives])
    assert isinstance(translation.spec, InferenceSpec)
    assert translation.spec.output == want_output
    if want_note:
        assert any(want_note in note for note in translation.notes)


def test_an_array_is_one_job_of_its_own_kind_with_one_task_per_index(tmp_path: Path) -> None:
    spec = _run(tmp_path, ["-A t", "--array=0-5:2,9%2"]).spec
    assert isinstance(spec, TrainingSpec) and spec.array is not None
    assert (spec.array.indexes, spec.array.max_parallel, spec.array.step) == ((0, 2, 4, 9), 2, 2)
    assert (spec.task_names(), spec.throttle(), spec.workers_per_task()) == (["0", "2", "4", "9"], 2, 1)


def test_inference_array_partitions_and_max_parallel(tmp_path: Path) -> None:
    spec = _run(tmp_path, ["-A t", "--array=1,3,5%2", "--kind=inference"]).spec
    assert isinstance(spec, InferenceSpec)
    assert (spec.partitions, spec.max_parallel, spec.task_names()) == (("1", "3", "5"), 2, ["1", "3", "5"])


# --- environment and entry point ------------------------------------------------------------


def test_recorded_environment(tmp_path: Path) -> None:
    translation = _run(tmp_path, ["-A t", "--comment='nightly run'", "--signal=B:USR1@90", "-e err/%j.txt"])
    assert translation.spec.env == {
        "MSBATCH_SUBMIT_DIR": CWD,
        "MSBATCH_COMMENT": "nightly run",
        "MSBATCH_SIGNAL": "B:USR1@90",
        "MSBATCH_SIGNAL_GRACE_S": "90",
    }
    # -e is honoured now (Slurm expands it per attempt), not only recorded
    assert translation.spec.sbatch is not None and translation.spec.sbatch.error == "err/%j.txt"


def test_script_text_is_the_whole_file(tmp_path: Path) -> None:
    spec = _run(tmp_path, ["-A t", "-N 1"]).spec
    assert spec.script == "#!/bin/bash\n#SBATCH -A t\n#SBATCH -N 1\n" + BODY and spec.command is None


def test_script_arguments_are_bound_before_the_first_command(tmp_path: Path) -> None:
    spec = _run(tmp_path, ["-A t"], "{script}", "--lr", "3e-4", "it's").spec
    lines = (spec.script or "").splitlines()
    assert lines[2] == "set -- --lr 3e-4 'it'\"'\"'s'  # msbatch: the script's command-line arguments"
    assert lines[:2] == ["#!/bin/bash", "#SBATCH -A t"] and lines[3] == BODY.strip()


def test_arguments_of_a_script_without_commands_are_appended() -> None:
    bound = bind_arguments("#!/bin/sh\n# only comments", ("a",))
    assert bound.endswith("\nset -- a  # msbatch: the script's command-line arguments\n")


@pytest.mark.parametrize(
    ("text", "want_message"),
    [
        pytest.param(
            "#!/usr/bin/env python3\nprint(1)\n",
            "runs python3: metasched runs batch scripts with bash",
            id="python",
        ),
        pytest.param("#!/bin/bash\r\nhostname\r\n", "DOS line breaks", id="dos"),
        pytest.param("hostname\n", "must start with #!", id="no-shebang"),
        pytest.param("", "must start with #!", id="empty"),
    ],
)
def test_scripts_that_cannot_run_are_refused(text: str, want_message: str) -> None:
    with pytest.raises(SbatchError, match=want_message):
        check_script(text, "x.sh")


@pytest.mark.parametrize("first_line", ["#!/bin/bash", "#!/bin/sh -e", "#!/usr/bin/env bash", "#!/bin/zsh"])
def test_shell_scripts_are_accepted(first_line: str) -> None:
    check_script(first_line + "\ntrue\n", "x.sh")


@pytest.mark.parametrize(
    ("first_line", "want"),
    [("#!/bin/bash", "bash"), ("#!/usr/bin/env -S bash -l", "bash"), ("#! /bin/sh -e", "sh"), ("#!", "")],
)
def test_interpreter(first_line: str, want: str) -> None:
    assert interpreter(first_line + "\ntrue\n") == want


def test_wrap_gives_a_command() -> None:
    translation = prepare(parse_command_line(["-A", "t", "--wrap", "hostname -f"]), {}, CWD).translation
    assert (translation.spec.command, translation.spec.script, translation.spec.name) == (
        "hostname -f",
        None,
        "wrap",
    )


def test_wrap_with_a_script_is_refused(tmp_path: Path) -> None:
    assert "--wrap runs a command" in _error(tmp_path, ["-A t"], "--wrap=true")

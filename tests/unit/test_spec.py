"""Job specs: examples, per-kind fields, validation messages with field paths, YAML/JSON, hashing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from meta.model.kinds import FailureCategory, JobKind, PriorityClass, Topology
from meta.model.resources import ResourceVector
from meta.model.spec import (
    EvaluationSpec,
    InferenceSpec,
    RetryPolicy,
    SpecError,
    TrainingSpec,
    load_spec_file,
    load_spec_text,
    spec_from_dict,
    spec_from_json,
    spec_hash,
    spec_to_json,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))

COMMON: dict[str, Any] = {"name": "job-1", "tenant": "tenant-a", "command": "python run.py"}


def training(**extra: Any) -> dict[str, Any]:
    return {"kind": "training", **COMMON, "resources": {"cpus": 4, "gpus": 1}, **extra}


def inference(**extra: Any) -> dict[str, Any]:
    return {
        "kind": "inference",
        **COMMON,
        "resources": {"cpus": 2},
        "partitions": 3,
        "output": "/out",
        **extra,
    }


def evaluation(**extra: Any) -> dict[str, Any]:
    return {"kind": "evaluation", **COMMON, "resources": {"cpus": 1}, **extra}


def problems(data: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        spec_from_dict(data)
    assert str(info.value) == "; ".join(info.value.problems)
    return info.value.problems


def without(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in keys}


# --- the example files ------------------------------------------------------------------------


def test_there_are_examples_of_each_kind() -> None:
    assert {path.name for path in EXAMPLE_FILES} >= {"train.yaml", "infer.yaml", "eval.yaml"}
    kinds = {load_spec_file(path).kind for path in EXAMPLE_FILES}
    assert kinds == set(JobKind)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_loads_and_round_trips(path: Path) -> None:
    spec = load_spec_file(path)
    assert spec.task_count() >= 1
    assert len(spec.task_names()) == spec.task_count()
    again = spec_from_json(spec_to_json(spec))
    assert again == spec
    assert spec_hash(again) == spec_hash(spec)


def test_train_example() -> None:
    spec = load_spec_file(EXAMPLES / "train.yaml")
    assert isinstance(spec, TrainingSpec)
    assert spec.kind == JobKind.TRAINING
    assert (spec.name, spec.tenant, spec.queue) == ("llama-7b-finetune", "tenant-a", "default")
    assert spec.workers == 2
    assert spec.workers_per_task() == 2
    assert spec.task_count() == 1
    assert spec.resources == ResourceVector(cpus=16, memory="128Gi", gpus=8, gpu_type="a100")
    assert spec.worker_resources() is spec.resources
    assert spec.topology == Topology.PREFER_SAME_SWITCH
    assert spec.checkpoint is not None
    assert spec.checkpoint.dir == "/tmp/metasched-demo/ckpt/llama-7b"
    assert spec.checkpoint.interval_s == 30 * 60
    assert spec.checkpoint.restore_cost_s == 2 * 60
    assert spec.preemptible and spec.is_preemptible()
    assert spec.min_runtime_s == 600
    assert spec.time_limit_s == 4 * 3600
    assert spec.retry.max_attempts == 3
    assert spec.retry.backoff_s == 30
    assert spec.retry.on == (FailureCategory.NODE_FAILURE, FailureCategory.PREEMPTED, FailureCategory.LOST)
    assert spec.env == {"NCCL_DEBUG": "WARN"}
    assert spec.secrets == ("WANDB_API_KEY",)
    assert spec.command is not None and "metasched checkpoint report" in spec.command
    assert spec.script is None
    assert spec.effective_priority_class() == PriorityClass.TRAINING


def test_infer_example() -> None:
    spec = load_spec_file(EXAMPLES / "infer.yaml")
    assert isinstance(spec, InferenceSpec)
    assert spec.tenant == "tenant-b"
    assert spec.partitions == ("shard-000", "shard-001", "shard-002", "shard-003")
    assert spec.task_count() == 4
    assert spec.task_names() == ["shard-000", "shard-001", "shard-002", "shard-003"]
    assert spec.workers_per_task() == 1
    assert spec.resources.gpu_type == "t4"
    assert spec.resources.memory_mib == 16 * 1024
    assert spec.output == "/tmp/metasched-demo/embed-corpus"
    assert spec.deadline == datetime(2030, 1, 1, 6, 0, tzinfo=UTC)
    assert spec.max_parallel == 4
    assert spec.time_limit_s == 30 * 60
    assert spec.is_preemptible()
    assert spec.effective_priority_class() == PriorityClass.DEADLINE_INFERENCE


def test_eval_example() -> None:
    spec = load_spec_file(EXAMPLES / "eval.yaml")
    assert isinstance(spec, EvaluationSpec)
    assert spec.task_count() == 1 and spec.task_names() == ["0"]
    assert spec.resources.gpus == 1 and spec.resources.gpu_type is None  # any GPU type
    assert spec.resources.memory_mib == 32 * 1024
    assert spec.time_limit_s == 3600
    assert spec.is_preemptible()
    assert spec.effective_priority_class() == PriorityClass.EVALUATION


# --- defaults ---------------------------------------------------------------------------------


def test_common_defaults() -> None:
    spec = spec_from_dict(evaluation())
    assert spec.queue == "default"
    assert spec.time_limit_s == 3600
    assert spec.retry == RetryPolicy()
    assert spec.retry.max_attempts == 3
    assert FailureCategory.USER_ERROR not in spec.retry.on  # a user's bug is not retried by default
    assert spec.env == {} and spec.secrets == ()
    assert spec.priority_class is None


@pytest.mark.parametrize(
    ("data", "preemptible"),
    [
        (training(), False),
        (inference(), True),
        (evaluation(), True),
        (evaluation(preemptible=False), False),
        (inference(preemptible=False), False),
        (training(preemptible=True, checkpoint={"dir": "/ckpt"}), True),
    ],
)
def test_preemptible_defaults_per_kind(data: dict[str, Any], preemptible: bool) -> None:
    assert spec_from_dict(data).is_preemptible() is preemptible


def test_checkpoint_defaults() -> None:
    spec = spec_from_dict(training(checkpoint={"dir": "/ckpt"}))
    assert isinstance(spec, TrainingSpec) and spec.checkpoint is not None
    assert spec.checkpoint.interval_s == 1800
    assert spec.checkpoint.restore_cost_s == 60


def test_spec_is_immutable() -> None:
    spec = spec_from_dict(training())
    with pytest.raises(ValidationError):
        spec.workers = 64  # type: ignore[misc]


# --- kinds and their fields -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (inference(workers=2), "workers"),
        (inference(topology="prefer-same-switch"), "topology"),
        (inference(checkpoint={"dir": "/c"}), "checkpoint"),
        (training(partitions=4), "partitions"),
        (training(output="/out"), "output"),
        (training(deadline="2030-01-01T00:00:00Z"), "deadline"),
        (training(max_parallel=2), "max_parallel"),
        (evaluation(workers=2), "workers"),
        (evaluation(partitions=2), "partitions"),
        (evaluation(checkpoint={"dir": "/c"}), "checkpoint"),
        (evaluation(deadline="2030-01-01T00:00:00Z"), "deadline"),
        (training(wokers=2), "wokers"),  # a typo is an error, not ignored
    ],
)
def test_fields_of_other_kinds_are_rejected_by_path(data: dict[str, Any], path: str) -> None:
    assert problems(data) == [f"{path}: Extra inputs are not permitted"]


def test_missing_kind() -> None:
    assert problems(without(training(), "kind")) == ["kind: missing (one of training, inference, evaluation)"]


@pytest.mark.parametrize("kind", ["pretraining", "Training", "", None, 3])
def test_unknown_kind(kind: Any) -> None:
    (problem,) = problems(training(kind=kind))
    assert problem.startswith("kind: ")
    assert "is not one of training, inference, evaluation" in problem


@pytest.mark.parametrize("kind", [["training"], {"training": 1}])
def test_unhashable_kind_is_a_spec_error(kind: Any) -> None:
    (problem,) = problems(training(kind=kind))
    assert problem.startswith("kind: ")


@pytest.mark.parametrize("data", [[], ["kind", "training"], "kind: training", 42, None])
def test_job_must_be_a_mapping(data: Any) -> None:
    assert problems(data) == ["(job): a job file must be a mapping of fields"]


# --- command / script -------------------------------------------------------------------------


def test_script_instead_of_command() -> None:
    spec = spec_from_dict({**without(training(), "command"), "script": "#!/bin/bash\nsrun python x.py\n"})
    assert spec.command is None and spec.script is not None and spec.script.startswith("#!")


@pytest.mark.parametrize(
    "data",
    [
        without(training(), "command"),  # neither
        training(script="run.sh"),  # both
        training(command=""),  # an empty command is no command
        without(evaluation(), "command"),
    ],
)
def test_exactly_one_of_command_or_script(data: dict[str, Any]) -> None:
    assert problems(data) == ["(job): give exactly one of 'command' or 'script'"]


# --- env and secrets --------------------------------------------------------------------------


def test_secret_names_are_accepted() -> None:
    spec = spec_from_dict(training(secrets=["WANDB_API_KEY", "HF_TOKEN", "_X1"]))
    assert spec.secrets == ("WANDB_API_KEY", "HF_TOKEN", "_X1")


@pytest.mark.parametrize(
    "value",
    ["WANDB_API_KEY=0123456789abcdef", "sk-live-0123456789abcdef", "hunter2 is my password", "ghp/abc+def=="],
)
def test_secret_values_are_refused_and_never_echoed(value: str) -> None:
    with pytest.raises(SpecError) as info:
        spec_from_dict(training(secrets=["HF_TOKEN", value]))
    assert info.value.problems == ["secrets: secrets are references by name (e.g. WANDB_API_KEY), not values"]
    assert value not in str(info.value)
    assert value not in repr(info.value)


@pytest.mark.parametrize(
    "data",
    [training(secrets=["METASCHED_JOB_ID"]), training(secrets=["HF_TOKEN"], env={"HF_TOKEN": "plain"})],
    ids=["reserved", "also-in-env"],
)
def test_secrets_the_launcher_refuses_are_refused_at_submit(data: dict[str, Any]) -> None:
    problems(data)


def test_env_names() -> None:
    spec = spec_from_dict(training(env={"NCCL_DEBUG": "INFO", "_private": "1", "OMP_NUM_THREADS": "8"}))
    assert spec.env["OMP_NUM_THREADS"] == "8"


@pytest.mark.parametrize(
    ("name", "reserved"),
    [("METASCHED_JOB_ID", True), ("METASCHED_PARTITION", True), ("1BAD", False), ("A-B", False), ("", False)],
)
def test_env_reserved_or_invalid_names_refused(name: str, reserved: bool) -> None:
    (problem,) = problems(training(env={"OK_NAME": "1", name: "x"}))
    assert problem.startswith("env: invalid or reserved environment variable name(s): ")
    assert problem.endswith(f": {name}")  # only the offending name is listed
    assert "OK_NAME" not in problem


def test_env_lists_every_bad_name_sorted() -> None:
    (problem,) = problems(training(env={"METASCHED_B": "1", "METASCHED_A": "2", "GOOD": "3"}))
    assert problem == "env: invalid or reserved environment variable name(s): METASCHED_A, METASCHED_B"


def test_env_values_must_be_strings_and_path_names_the_variable() -> None:
    assert problems(training(env={"WORLD": 1})) == ["env.WORLD: Input should be a valid string"]


# --- training ---------------------------------------------------------------------------------


def test_preemptible_training_needs_a_checkpoint() -> None:
    assert problems(training(preemptible=True)) == [
        "(job): a preemptible training job needs a 'checkpoint' section"
    ]
    assert spec_from_dict(training(preemptible=False)).is_preemptible() is False
    assert spec_from_dict(training(checkpoint={"dir": "/c"})).is_preemptible() is False  # opt-in only


@pytest.mark.parametrize("workers", [0, -1, 4097])
def test_workers_bounds(workers: int) -> None:
    (problem,) = problems(training(workers=workers))
    assert problem.startswith("workers: ")


def test_topology_values() -> None:
    assert spec_from_dict(training(topology="require-same-switch")).topology == Topology.REQUIRE_SAME_SWITCH  # type: ignore[union-attr]
    (problem,) = problems(training(topology="same-rack"))
    assert problem.startswith("topology: ")


# --- inference --------------------------------------------------------------------------------


def test_inference_partitions_as_count() -> None:
    spec = spec_from_dict(inference(partitions=3))
    assert spec.task_count() == 3
    assert spec.task_names() == ["0", "1", "2"]
    assert spec_from_dict(inference(partitions=20_000)).task_count() == 20_000


def test_inference_partitions_as_shard_list() -> None:
    spec = spec_from_dict(inference(partitions=["en", "de", "fr"]))
    assert spec.task_count() == 3
    assert spec.task_names() == ["en", "de", "fr"]  # order kept


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        (0, "partitions must be between 1 and 20000"),
        (-2, "partitions must be between 1 and 20000"),
        (20_001, "partitions must be between 1 and 20000"),
        ([], "the list of input shards is empty"),
        (["a", "b", "a"], "input shards must be unique"),
    ],
)
def test_inference_partitions_invalid(partitions: Any, message: str) -> None:
    assert problems(inference(partitions=partitions)) == [f"partitions: {message}"]


def test_inference_shard_names_are_not_empty() -> None:
    problems(inference(partitions=["a", ""]))


def test_inference_needs_partitions_and_output() -> None:
    found = problems(without(inference(), "partitions", "output"))
    assert sorted(found) == ["output: Field required", "partitions: Field required"]


@pytest.mark.parametrize(
    "data",
    [
        inference(partitions=True),
        training(workers=True),
        training(resources={"cpus": 1, "gpus": True}),
    ],
    ids=["partitions", "workers", "gpus"],
)
def test_booleans_are_not_counts(data: dict[str, Any]) -> None:
    problems(data)


@pytest.mark.parametrize(
    ("deadline", "expected"),
    [
        ("2030-01-01T06:00:00Z", datetime(2030, 1, 1, 6, tzinfo=UTC)),
        ("2030-01-01T08:00:00+02:00", datetime(2030, 1, 1, 6, tzinfo=UTC)),
        ("2030-01-01T06:00:00", datetime(2030, 1, 1, 6, tzinfo=UTC)),  # naive = UTC
    ],
)
def test_deadline_is_utc_and_raises_priority_class(deadline: str, expected: datetime) -> None:
    spec = spec_from_dict(inference(deadline=deadline))
    assert isinstance(spec, InferenceSpec)
    assert spec.deadline == expected
    assert spec.effective_priority_class() == PriorityClass.DEADLINE_INFERENCE


def test_priority_class_defaults_and_overrides() -> None:
    assert spec_from_dict(inference()).effective_priority_class() == PriorityClass.INFERENCE
    explicit = spec_from_dict(inference(deadline="2030-01-01T00:00:00Z", priority_class="inference"))
    assert explicit.effective_priority_class() == PriorityClass.INFERENCE  # the user's choice wins
    assert (
        spec_from_dict(evaluation(priority_class="training")).effective_priority_class()
        == PriorityClass.TRAINING
    )
    (problem,) = problems(training(priority_class="urgent"))
    assert problem.startswith("priority_class: ")


def test_priority_classes_are_the_ones_the_policy_ranks() -> None:
    # the class a spec stores is looked up by name in the scheduler's configuration
    from meta.policy.config import DEFAULT_PRIORITY_CLASSES, SchedulerConfig

    assert {c.value for c in PriorityClass} == set(DEFAULT_PRIORITY_CLASSES)
    config = SchedulerConfig()
    ranks = [config.rank(c.value, JobKind.TRAINING, None) for c in PriorityClass]
    assert len(set(ranks)) == len(ranks)
    assert config.rank(PriorityClass.DEADLINE_INFERENCE.value, JobKind.INFERENCE, None) > config.rank(
        PriorityClass.TRAINING.value, JobKind.TRAINING, None
    )


def test_deadline_must_be_a_time() -> None:
    (problem,) = problems(inference(deadline="next tuesday"))
    assert problem.startswith("deadline: cannot parse time 'next tuesday'")


# --- YAML and JSON ----------------------------------------------------------------------------

YAML_12 = """
kind: training
name: yaml12
tenant: tenant-a
command: python train.py
resources: {cpus: 2}
preemptible: false
retry:
  on: [oom, node_failure]
env:
  NCCL_IB_DISABLE: no
  FLAG: yes
  MODE: on
"""


def test_yaml_on_key_and_yes_no_stay_strings() -> None:
    spec = load_spec_text(YAML_12)
    assert spec.retry.on == (FailureCategory.OOM, FailureCategory.NODE_FAILURE)
    assert spec.env == {"NCCL_IB_DISABLE": "no", "FLAG": "yes", "MODE": "on"}
    assert spec.is_preemptible() is False


def test_yaml_true_false_are_still_booleans() -> None:
    spec = load_spec_text(YAML_12.replace("preemptible: false", "preemptible: true\ncheckpoint: {dir: /c}"))
    assert spec.is_preemptible() is True
    (problem,) = problems(training(env={"FLAG": True}))
    assert problem == "env.FLAG: Input should be a valid string"
    with pytest.raises(SpecError) as info:
        load_spec_text(YAML_12.replace("FLAG: yes", "FLAG: true"))
    assert info.value.problems == ["env.FLAG: Input should be a valid string"]


def test_yaml_on_as_top_level_key_is_named_on() -> None:
    with pytest.raises(SpecError) as info:
        load_spec_text(YAML_12 + "on: push\n")
    assert info.value.problems == ["on: Extra inputs are not permitted"]


def test_json_job_file(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(inference(partitions=["a", "b"], deadline="2030-01-01T00:00:00Z")))
    spec = load_spec_file(path)
    assert isinstance(spec, InferenceSpec)
    assert spec.task_names() == ["a", "b"]
    assert spec == spec_from_dict(inference(partitions=["a", "b"], deadline="2030-01-01T00:00:00Z"))


def test_load_spec_file_accepts_str_paths() -> None:
    assert isinstance(load_spec_file(str(EXAMPLES / "eval.yaml")), EvaluationSpec)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec_file(tmp_path / "nope.yaml")
    (problem,) = info.value.problems
    assert problem.startswith("(file) ") and "nope.yaml" in problem and "cannot read" in problem


@pytest.mark.parametrize("text", ["kind: [", "{kind: training", "a: b: c", "\t- x"])
def test_malformed_yaml(text: str) -> None:
    with pytest.raises(SpecError) as info:
        load_spec_text(text, "bad.yaml")
    (problem,) = info.value.problems
    assert problem.startswith("(file) bad.yaml: not valid YAML or JSON")


def test_empty_file_is_not_a_mapping() -> None:
    with pytest.raises(SpecError) as info:
        load_spec_text("")
    assert info.value.problems == ["(job): a job file must be a mapping of fields"]


# --- canonical JSON and hashing ---------------------------------------------------------------


def test_spec_to_json_is_canonical() -> None:
    spec = load_spec_file(EXAMPLES / "train.yaml")
    text = spec_to_json(spec)
    data = json.loads(text)
    assert text == json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert data["kind"] == "training"
    assert data["checkpoint"]["interval_s"] == 1800  # field names, not aliases
    assert data["resources"]["memory_mib"] == 128 * 1024
    assert spec_to_json(spec_from_json(text)) == text


@pytest.mark.parametrize("data", [training(), inference(partitions=["x", "y"]), evaluation(), inference()])
def test_json_round_trip(data: dict[str, Any]) -> None:
    spec = spec_from_dict(data)
    back = spec_from_json(spec_to_json(spec))
    assert back == spec
    assert type(back) is type(spec)


def test_spec_hash_is_stable() -> None:
    first = spec_hash(load_spec_file(EXAMPLES / "train.yaml"))
    second = spec_hash(load_spec_file(EXAMPLES / "train.yaml"))
    assert first == second
    assert len(first) == 64 and all(c in "0123456789abcdef" for c in first)


def test_spec_hash_ignores_spelling_of_equal_values() -> None:
    # key order, aliases, units and defaults spelled out do not change the spec
    a = spec_from_dict(training(checkpoint={"dir": "/c", "interval": "30m"}, time_limit="1h"))
    b = spec_from_dict(
        {
            "time_limit_s": 3600,
            "checkpoint": {"interval_s": 1800, "dir": "/c"},
            "queue": "default",
            **training(),
            "resources": {"gpus": 1, "cpus": 4.0, "memory": 0},
        }
    )
    assert spec_hash(a) == spec_hash(b)


@pytest.mark.parametrize(
    "change",
    [
        {"name": "job-2"},
        {"command": "python run.py --lr 0.1"},
        {"workers": 2},
        {"env": {"A": "1"}},
        {"resources": {"cpus": 4, "gpus": 1, "gpu_type": "a100"}},
        {"retry": {"max_attempts": 4}},
        {"time_limit": "2h"},
        {"queue": "batch"},
    ],
)
def test_spec_hash_is_sensitive_to_changes(change: dict[str, Any]) -> None:
    assert spec_hash(spec_from_dict(training(**change))) != spec_hash(spec_from_dict(training()))


def test_spec_hash_differs_between_kinds_with_same_fields() -> None:
    assert spec_hash(spec_from_dict(evaluation(preemptible=False))) != spec_hash(
        spec_from_dict({**evaluation(preemptible=False), "kind": "training"})
    )


# --- problems name their field path -----------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "prefix"),
    [
        (training(resources={"memory": "12Q"}), "resources.memory: cannot parse memory size '12Q'"),
        (training(resources={"memory": True}), "resources.memory: memory must be a size"),
        (training(resources={"gpus": -1}), "resources.gpus: "),
        (training(resources={"cpus": 1, "ram": "4G"}), "resources.ram: Extra inputs are not permitted"),
        (
            training(checkpoint={"dir": "/c", "restore_cost": "x"}),
            "checkpoint.restore_cost: cannot parse duration",
        ),
        (training(checkpoint={"interval": "1h"}), "checkpoint.dir: Field required"),
        (training(retry={"on": ["bogus"]}), "retry.on[0]: "),
        (training(retry={"on": ["oom", "bogus"]}), "retry.on[1]: "),
        (training(retry={"max_attempts": 0}), "retry.max_attempts: "),
        (training(retry={"backoff": "soon"}), "retry.backoff: cannot parse duration"),
        (training(locality={"nodes": "gpu01", "zone": "x"}), "locality."),
        (training(time_limit="forever"), "time_limit: cannot parse duration"),
        (training(time_limit=0), "time_limit: "),
        (training(min_runtime=-5), "min_runtime: a duration must not be negative"),
        (training(name="has space"), "name: String should match pattern"),
        (training(tenant=""), "tenant: "),
        (training(queue="-bad"), "queue: "),
        (inference(partitions="three"), "partitions: "),
        (inference(max_parallel=0), "max_parallel: "),
    ],
)
def test_problem_names_the_field_path(data: dict[str, Any], prefix: str) -> None:
    found = problems(data)
    assert any(problem.startswith(prefix) for problem in found), found


def test_every_problem_is_reported_at_once() -> None:
    found = problems(training(workers=0, resources={"memory": "x"}, retry={"on": ["nope"]}, time_limit="?"))
    paths = sorted(problem.split(":", 1)[0] for problem in found)
    assert paths == ["resources.memory", "retry.on[0]", "time_limit", "workers"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            training(checkpoint={"dir": "/c", "interval": "bad"}),
            "checkpoint.interval: cannot parse duration 'bad' (use e.g. 90, 30m, 4h, 2d or 1-12:00:00)",
        ),
        (training(interval="1h"), "interval: Extra inputs are not permitted"),
        (training(tuples=1), "tuples: Extra inputs are not permitted"),
    ],
    ids=["checkpoint.interval", "interval", "tuples"],
)
def test_field_paths_that_start_like_pydantic_tags(data: dict[str, Any], expected: str) -> None:
    assert problems(data) == [expected]


def test_infinite_time_limit_is_refused() -> None:
    with pytest.raises(SpecError):
        load_spec_text(YAML_12 + "time_limit: .inf\n")

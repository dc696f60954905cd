"""Job specifications: immutable, validated descriptions of training, inference and evaluation work.

A spec is what the user asked for and never changes after submit; attempts and observed state
live elsewhere. ``JobSpec`` is a discriminated union on ``kind``: each kind accepts only the
fields it needs, so a typo or a field of another kind is an error that names the field path.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from meta.model.arrays import MAX_ARRAY_INDEX, compress_indexes
from meta.model.dependency import MAX_DEPENDENCY_CHARS, Dependency, parse_dependency
from meta.model.durations import parse_duration_s, parse_instant
from meta.model.jobfile import JobFileError, decode_job_text, parse_job_text, read_job_bytes
from meta.model.kinds import FailureCategory, JobKind, PriorityClass, Topology
from meta.model.limits import (
    MAX_BACKOFF_S,
    MAX_COMMAND_BYTES,
    MAX_DURATION_S,
    MAX_ENV_VALUE_BYTES,
    MAX_ENV_VARS,
    MAX_LOCALITY_NODES,
    MAX_PATH_BYTES,
    MAX_SCRIPT_BYTES,
    MAX_SECRETS,
    MAX_SHARD_NAME_CHARS,
    MAX_TASKS_PER_JOB,
    clip,
    is_slurm_name,
    printable,
    text_problem,
    tree_problems,
)
from meta.model.resources import ResourceVector
from meta.model.sbatch_fields import ClusterName, SbatchFields

# ASCII names. NAME_PATTERN runs in pydantic's Rust regex engine, where ``$`` is the end of the
# text; Python's ``re`` patterns below are used with fullmatch, because there ``$`` also matches
# before a final newline ("LEAKME\n" would pass)
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def _seconds(value: Any) -> float:
    return parse_duration_s(value)


def _text(value: str) -> str:
    """_text refuses strings that cannot be stored or handed to Slurm (NUL, lone surrogates)."""
    problem = text_problem(value)
    if problem:
        raise ValueError(f"text {problem}")
    return value


def _bounded(limit: int, what: str):  # noqa: ANN202 - a validator factory
    """_bounded makes a validator that refuses text longer than ``limit`` bytes of UTF-8."""

    def check(value: str) -> str:
        if len(value.encode("utf-8")) > limit:
            raise ValueError(f"{what} is longer than {limit // 1024} KiB" if limit >= 1024 else f"{what} is too long")
        return value

    return AfterValidator(check)


def _slurm_name(value: str) -> str:
    """_slurm_name refuses what is not a plain Slurm object name (no spaces, no options, ASCII)."""
    if not is_slurm_name(value):
        raise ValueError(f"'{printable(value)[:80]}' is not a Slurm name (letters, digits, '.', '_', '-'; at most 64)")
    return value


Text = Annotated[str, AfterValidator(_text)]
SlurmName = Annotated[str, AfterValidator(_text), AfterValidator(_slurm_name)]
PathText = Annotated[str, Field(min_length=1), AfterValidator(_text), _bounded(MAX_PATH_BYTES, "a path")]
Duration = Annotated[float, Field(ge=0, le=MAX_DURATION_S)]
Backoff = Annotated[float, Field(ge=0, le=MAX_BACKOFF_S)]
# a count must be written as a number: YAML's true/false are not 1/0 here
StrictCount = Annotated[int, Strict()]


class _Frozen(BaseModel):
    """_Frozen is the base of every spec model: immutable and strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class RetryPolicy(_Frozen):
    """RetryPolicy says how many attempts a task gets and which failures earn a retry."""

    max_attempts: StrictCount = Field(default=3, ge=1, le=100)
    backoff_s: Backoff = Field(default=30.0, alias="backoff")
    on: tuple[FailureCategory, ...] = (
        FailureCategory.NODE_FAILURE,
        FailureCategory.PREEMPTED,
        FailureCategory.LOST,
        FailureCategory.LAUNCH_FAILURE,
    )

    _parse_backoff = field_validator("backoff_s", mode="before")(classmethod(lambda cls, v: _seconds(v)))

    def retries(self, category: FailureCategory, attempts_so_far: int) -> bool:
        """retries tells whether a task that failed with ``category`` gets another attempt."""
        return category in self.on and attempts_so_far < self.max_attempts


class CheckpointSpec(_Frozen):
    """CheckpointSpec describes where and how often a training job checkpoints."""

    dir: PathText
    interval_s: Duration = Field(default=1800.0, alias="interval")
    restore_cost_s: Duration = Field(default=60.0, alias="restore_cost")
    # the dir is on storage every Slurm cluster of the site mounts: a retry may resume on any of
    # them. False (the default): a checkpoint is read only on the cluster that wrote it (issue 26)
    shared: bool = False

    _parse = field_validator("interval_s", "restore_cost_s", mode="before")(
        classmethod(lambda cls, v: _seconds(v))
    )


class Locality(_Frozen):
    """Locality is a soft hint: prefer these nodes or this switch (e.g. where the data is cached)."""

    nodes: tuple[SlurmName, ...] = Field(default=(), max_length=MAX_LOCALITY_NODES)
    switch: SlurmName | None = None


class DataSpec(_Frozen):
    """DataSpec says which Slurm cluster a job's data lives on: a preference, or with ``required`` a hard filter."""

    cluster: ClusterName
    required: bool = False


class ArraySpec(_Frozen):
    """ArraySpec makes a job an array (sbatch ``--array``): one independent task per index, at most ``max_parallel`` running."""

    indexes: Annotated[
        tuple[Annotated[StrictCount, Field(ge=0, le=MAX_ARRAY_INDEX)], ...],
        Field(min_length=1, max_length=MAX_TASKS_PER_JOB),
    ]
    max_parallel: StrictCount | None = Field(default=None, ge=1, le=MAX_TASKS_PER_JOB)
    step: StrictCount = Field(default=1, ge=1, le=MAX_ARRAY_INDEX)  # SLURM_ARRAY_TASK_STEP (sbatch's text step)

    @field_validator("indexes")
    @classmethod
    def _sorted_unique(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if list(value) != sorted(set(value)):
            raise ValueError("array indexes must be sorted and unique")
        return value

    def text(self) -> str:
        """text is the array as sbatch writes it: ``0-5%2``."""
        return compress_indexes(self.indexes) + (f"%{self.max_parallel}" if self.max_parallel else "")


class _CommonSpec(_Frozen):
    """_CommonSpec holds the fields every job kind shares."""

    name: str = Field(pattern=NAME_PATTERN)
    tenant: str = Field(pattern=NAME_PATTERN)
    queue: str = Field(default="default", pattern=NAME_PATTERN)
    priority_class: PriorityClass | None = None
    qos: SlurmName | None = None
    partition: SlurmName | None = None
    retry: RetryPolicy = RetryPolicy()
    locality: Locality | None = None
    # where the job's data lives (issue 26): preferred, or required, when its tasks are placed
    data: DataSpec | None = None
    command: Annotated[Text, _bounded(MAX_COMMAND_BYTES, "the command")] | None = None
    script: Annotated[Text, _bounded(MAX_SCRIPT_BYTES, "the script")] | None = None
    env: dict[Text, Annotated[Text, _bounded(MAX_ENV_VALUE_BYTES, "an environment value")]] = Field(
        default_factory=dict, max_length=MAX_ENV_VARS
    )
    secrets: tuple[Text, ...] = Field(default=(), max_length=MAX_SECRETS)
    time_limit_s: Duration = Field(default=3600.0, alias="time_limit", gt=0)
    # sbatch's own settings (msbatch): working folder, -o/-e, mail, --export, placement filters
    sbatch: SbatchFields | None = None
    # sbatch --array: the job's tasks are its elements (training and evaluation; inference has partitions)
    array: ArraySpec | None = None

    _parse_time = field_validator("time_limit_s", mode="before")(classmethod(lambda cls, v: _seconds(v)))

    # sbatch's gates (meta/policy/dependencies.py): --dependency in canonical text, --kill-on-invalid-dep
    # (None: the site's default), --begin (UTC), --hold (the job starts held; `metasched release` frees it)
    dependency: Annotated[str, Field(max_length=MAX_DEPENDENCY_CHARS)] | None = None
    kill_on_invalid_dep: bool | None = None
    begin: datetime | None = None
    hold: bool = False

    @field_validator("dependency")
    @classmethod
    def _dependency(cls, value: str | None) -> str | None:
        return None if value is None else parse_dependency(value).normalise()

    @field_validator("begin", mode="before")
    @classmethod
    def _begin(cls, value: Any) -> datetime | None:
        return None if value is None else parse_instant(value)

    def parsed_dependency(self) -> Dependency | None:
        """parsed_dependency is the dependency's conditions (None without one)."""
        return None if self.dependency is None else parse_dependency(self.dependency)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [name for name in value if not _ENV_NAME.fullmatch(name) or name.startswith("METASCHED_")]
        if bad:
            names = ", ".join(printable(name) for name in sorted(bad)[:5])
            raise ValueError(f"invalid or reserved environment variable name(s): {names}")
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # only names are allowed: a value (anything not an identifier) must never be stored
        bad = [name for name in value if not _ENV_NAME.fullmatch(name)]
        if bad:
            raise ValueError("secrets are references by name (e.g. WANDB_API_KEY), not values")
        reserved = [name for name in value if name.startswith("METASCHED_")]
        if reserved:
            raise ValueError(f"reserved secret name(s): {', '.join(sorted(reserved))}")
        return value

    @model_validator(mode="after")
    def _one_entrypoint(self) -> _CommonSpec:
        if bool(self.command) == bool(self.script):
            raise ValueError("give exactly one of 'command' or 'script'")
        clash = sorted(set(self.secrets) & set(self.env))
        if clash:
            raise ValueError(f"secret(s) also given as plain env: {', '.join(clash)}")
        return self

    @model_validator(mode="after")
    def _data_within_clusters(self) -> _CommonSpec:
        listed = self.sbatch.clusters if self.sbatch else ()
        if self.data and self.data.required and listed and self.data.cluster not in listed:
            # a job that must read its data on a cluster it may not run on could never start
            raise ValueError(f"data.cluster {self.data.cluster} is required but not in the job's --clusters "
                             f"({','.join(listed)})")
        return self

    def effective_priority_class(self) -> PriorityClass:
        """effective_priority_class is the class given, or the kind's default."""
        return self.priority_class or self._default_priority_class()

    def _default_priority_class(self) -> PriorityClass:
        raise NotImplementedError

    def task_count(self) -> int:
        """task_count is how many schedulable tasks this job expands into (one per array element)."""
        return len(self.array.indexes) if self.array else 1

    def throttle(self) -> int | None:
        """throttle is how many of the job's tasks may run at once (None: no limit)."""
        return self.array.max_parallel if self.array else None

    def worker_resources(self) -> ResourceVector:
        """worker_resources is what one worker (one node share) of a task asks for."""
        raise NotImplementedError

    def workers_per_task(self) -> int:
        """workers_per_task is the gang size of one task (1 except for training)."""
        return 1

    def is_preemptible(self) -> bool:
        """is_preemptible tells whether the policy may evict this job's tasks."""
        return False

    def task_names(self) -> list[str]:
        """task_names names each task (an array element's index, a shard name for inference partitions)."""
        if self.array:
            return [str(index) for index in self.array.indexes]
        return [str(index) for index in range(self.task_count())]


class TrainingSpec(_CommonSpec):
    """TrainingSpec is a gang of identical workers that start and stop together."""

    kind: Literal[JobKind.TRAINING] = JobKind.TRAINING
    workers: StrictCount = Field(default=1, ge=1, le=4096)
    resources: ResourceVector
    topology: Topology = Topology.NONE
    checkpoint: CheckpointSpec | None = None
    preemptible: bool = False
    min_runtime_s: Duration = Field(default=0.0, alias="min_runtime")

    _parse_min = field_validator("min_runtime_s", mode="before")(classmethod(lambda cls, v: _seconds(v)))

    @model_validator(mode="after")
    def _preemptible_needs_checkpoint(self) -> TrainingSpec:
        # evicting a job that never checkpoints throws all of its work away
        if self.preemptible and self.checkpoint is None:
            raise ValueError("a preemptible training job needs a 'checkpoint' section")
        return self

    def _default_priority_class(self) -> PriorityClass:
        return PriorityClass.TRAINING

    def worker_resources(self) -> ResourceVector:
        """worker_resources is the per-worker request."""
        return self.resources

    def workers_per_task(self) -> int:
        """workers_per_task is the gang size."""
        return self.workers

    def is_preemptible(self) -> bool:
        """is_preemptible is true only for checkpointing jobs that opted in."""
        return self.preemptible


class InferenceSpec(_CommonSpec):
    """InferenceSpec is a batch job split into independently retried input partitions."""

    kind: Literal[JobKind.INFERENCE] = JobKind.INFERENCE
    partitions: StrictCount | Annotated[
        tuple[Annotated[Text, Field(max_length=MAX_SHARD_NAME_CHARS)], ...], Field(max_length=MAX_TASKS_PER_JOB)
    ]
    resources: ResourceVector
    output: PathText
    deadline: datetime | None = None
    max_parallel: StrictCount | None = Field(default=None, ge=1, le=MAX_TASKS_PER_JOB)
    preemptible: bool = True

    @field_validator("deadline", mode="before")
    @classmethod
    def _parse_deadline(cls, value: Any) -> datetime | None:
        return None if value is None else parse_instant(value)

    @field_validator("array")
    @classmethod
    def _no_array(cls, value: ArraySpec | None) -> ArraySpec | None:
        if value is not None:
            raise ValueError("an inference job's tasks are its 'partitions' (with 'max_parallel'), not an array")
        return value

    @field_validator("partitions")
    @classmethod
    def _partitions(cls, value: int | tuple[str, ...]) -> int | tuple[str, ...]:
        if isinstance(value, int):
            if not 1 <= value <= MAX_TASKS_PER_JOB:
                raise ValueError(f"partitions must be between 1 and {MAX_TASKS_PER_JOB}")
        else:
            if not value:
                raise ValueError("the list of input shards is empty")
            if len(set(value)) != len(value):
                raise ValueError("input shards must be unique")
            if any(not shard.strip() for shard in value):
                raise ValueError("input shard names must not be empty")
        return value

    def _default_priority_class(self) -> PriorityClass:
        return PriorityClass.DEADLINE_INFERENCE if self.deadline else PriorityClass.INFERENCE

    def task_count(self) -> int:
        """task_count is the number of partitions."""
        return self.partitions if isinstance(self.partitions, int) else len(self.partitions)

    def throttle(self) -> int | None:
        """throttle is max_parallel: how many partitions may run at once (None: no limit)."""
        return self.max_parallel

    def task_names(self) -> list[str]:
        """task_names are the shard names, or partition indexes."""
        if isinstance(self.partitions, int):
            return [str(index) for index in range(self.partitions)]
        return list(self.partitions)

    def worker_resources(self) -> ResourceVector:
        """worker_resources is the per-partition request."""
        return self.resources

    def is_preemptible(self) -> bool:
        """is_preemptible: partitions are replayable, so by default yes."""
        return self.preemptible


class EvaluationSpec(_CommonSpec):
    """EvaluationSpec is one low-priority, preemptible task."""

    kind: Literal[JobKind.EVALUATION] = JobKind.EVALUATION
    resources: ResourceVector
    preemptible: bool = True

    def _default_priority_class(self) -> PriorityClass:
        return PriorityClass.EVALUATION

    def worker_resources(self) -> ResourceVector:
        """worker_resources is the single task's request."""
        return self.resources

    def is_preemptible(self) -> bool:
        """is_preemptible: evaluations are preemptible unless the user says otherwise."""
        return self.preemptible


JobSpec = Annotated[TrainingSpec | InferenceSpec | EvaluationSpec, Field(discriminator="kind")]
_JOB_SPEC = TypeAdapter(JobSpec)
AnySpec = TrainingSpec | InferenceSpec | EvaluationSpec


class SpecError(ValueError):
    """SpecError is an invalid job file: each problem names its field path."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


# pydantic's own labels inside an error location (a union branch or validator), not field names
_PYDANTIC_LABEL = re.compile(r"^(?:int|str|float|bool|tuple\[.*\]|list\[.*\]|dict\[.*\]|function-[a-z-]+\[.*\]|tagged-union\[.*\])$")


def _field_path(location: tuple[Any, ...]) -> str:
    """_field_path renders pydantic's error location without the union tag noise."""
    parts: list[str] = []
    for item in location:
        if item in {"training", "inference", "evaluation"} and not parts:
            continue  # the discriminator's branch name
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif _PYDANTIC_LABEL.match(str(item)):
            continue
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "(job)"


def spec_from_dict(data: Any) -> AnySpec:
    """spec_from_dict validates a mapping into a JobSpec or raises SpecError naming each field."""
    if not isinstance(data, dict):
        raise SpecError(["(job): a job file must be a mapping of fields"])
    shape = tree_problems(data)  # sizes, depth and encodings first: before pydantic spends anything
    if shape:
        raise SpecError(shape)
    kinds = ", ".join(kind.value for kind in JobKind)
    if "kind" not in data:
        raise SpecError([f"kind: missing (one of {kinds})"])
    if not isinstance(data["kind"], str) or data["kind"] not in {kind.value for kind in JobKind}:
        raise SpecError([clip(f"kind: {data['kind']!r} is not one of {kinds}")])
    return _validate(data)


def _validate(data: Any) -> AnySpec:
    """_validate runs the model over plain data; its errors become one SpecError naming each field."""
    try:
        return _JOB_SPEC.validate_python(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False, include_input=False):
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(clip(f"{_field_path(tuple(error['loc']))}: {message}"))
        raise SpecError(problems) from None


def load_spec_text(text: str, source: str = "<job>") -> AnySpec:
    """load_spec_text parses YAML or JSON job text (JSON is YAML) within the limits and validates it."""
    try:
        data = parse_job_text(text, source)
    except JobFileError as exc:
        raise SpecError([f"(file) {exc}"]) from None
    return spec_from_dict(data)


def load_spec_file(path: str | Path) -> AnySpec:
    """load_spec_file reads (at most MAX_JOB_FILE_BYTES, strict UTF-8) and validates a job file."""
    try:
        text = decode_job_text(read_job_bytes(path), str(path))
    except JobFileError as exc:
        raise SpecError([f"(file) {exc}"]) from None
    return load_spec_text(text, str(path))


# fields added after jobs were first stored: left out of the stored form while unset, so a spec
# stored before them keeps its text and its hash (an idempotent resubmit is not a conflict)
_UNSET_LATER: dict[str, Any] = {
    "array": None, "dependency": None, "kill_on_invalid_dep": None, "begin": None, "hold": False, "sbatch": None,
    "data": None,
}
# the same for fields added inside a section: (section, field) -> the value left out
_UNSET_LATER_IN: dict[tuple[str, str], Any] = {("checkpoint", "shared"): False}


def spec_to_json(spec: AnySpec) -> str:
    """spec_to_json is the canonical serialisation stored once per job (sorted keys, aliases off)."""
    data = spec.model_dump(mode="json")
    for name, unset in _UNSET_LATER.items():
        if name in data and data[name] == unset:
            del data[name]
    for (section, name), unset in _UNSET_LATER_IN.items():
        part = data.get(section)
        if isinstance(part, dict) and name in part and part[name] == unset:
            del part[name]
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def spec_from_json(text: str) -> AnySpec:
    """spec_from_json restores a stored spec under the current rules (SpecError if they refuse it)."""
    return _validate(json.loads(text))


def spec_hash(spec: AnySpec) -> str:
    """spec_hash fingerprints a spec so an idempotency key can detect a changed resubmission."""
    return hashlib.sha256(spec_to_json(spec).encode()).hexdigest()

"""translate turns merged sbatch options and a script into a metasched JobSpec.

Rules (the same table is in ``msbatch --help`` and the report):

Kind
  ``--kind`` chooses; without it every job is a TrainingSpec (``workers=1`` for one node) — a
  multi-node job can only be training, and a single-node sbatch job is a non-preemptible,
  run-to-completion job, which is what TrainingSpec is. ``--kind=inference`` needs ``--array``
  (its indexes are the partitions); inference and evaluation jobs run on one node (``-N 1``).

Arrays (``--array`` of a training or evaluation job)
  ``array`` = the indexes (sorted, unique, as Slurm) and ``%N`` as ``max_parallel``: one job
  whose tasks are the elements, each of the job's own kind (an array never becomes inference).

Identity
  tenant = ``-A/--account`` (required); name = ``-J/--job-name``, else the script's file name
  as sbatch takes it (``job.sh``; ``wrap`` for ``--wrap``), sanitised to the spec's name pattern
  (other characters become ``-``); ``--qos`` and ``--partition`` are carried; ``--time`` becomes ``time_limit``
  (left out: the spec's default, one hour).

Per worker (per node, or per array task)
  tasks = ``--ntasks-per-node``, else ``--ntasks`` / nodes (must divide evenly; both given
  must agree), else 1. cpus = tasks × ``--cpus-per-task`` (default 1). memory = ``--mem``
  (per node), or ``--mem-per-cpu`` × cpus, or ``--mem-per-gpu`` × GPUs, else no memory
  request. GPUs = ``--gres=gpu[:type][:N]`` or ``--gpus-per-node=[type:]N`` per node, or
  ``--gpus=[type:]N`` ÷ nodes (must divide evenly).

Training
  workers = ``-N/--nodes`` (a range only when its ends agree).

Inference (``--kind=inference --array``)
  partitions = the array indexes as strings (sorted, unique, as Slurm); ``%N`` → max_parallel;
  output = the directory of ``--output`` (``%x`` expanded; other ``%`` patterns in the directory
  fall back, with a note), else ``<cwd>/msbatch-out/<name>``.

Entry point
  script = the script's full text; its arguments are bound with ``set -- ...`` (see
  ``cli.sbatch.script``); ``--wrap=CMD`` gives ``command`` instead.

Environment (``METASCHED_*`` is reserved by the spec; ``SBATCH_*`` are sbatch's *input*
variables and would change the executor's own sbatch call, so msbatch uses ``MSBATCH_*``)
  MSBATCH_SUBMIT_DIR (the submission directory), MSBATCH_COMMENT (``--comment``), MSBATCH_SIGNAL
  (``--signal`` normalised, e.g. ``B:USR1@90``) and MSBATCH_SIGNAL_GRACE_S; the variables
  ``--export`` sends (``cli.sbatch.semantics``).

sbatch's own settings
  ``-D``, ``-o/-e``, ``--open-mode``, mail, ``--export``, the task layout and the placement
  filters go to the spec's ``sbatch:`` section (``cli.sbatch.semantics``); ``-w`` without
  ``-N`` asks for as many nodes as it names; ``-M`` gives ``sbatch.clusters`` and qualifies bare
  ``-w``/``-x`` names (``cli.sbatch.clusters``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

from cli.sbatch.gates import gate_fields
from cli.sbatch.options import Options, SbatchError, parsed
from cli.sbatch.semantics import expand_hostlist, retry_fields, sbatch_section
from cli.sbatch.values import (
    GpuRequest,
    parse_array,
    parse_count,
    parse_gpu_request,
    parse_gres,
    parse_nodes,
    parse_signal,
    parse_size_mib,
    parse_time_s,
)
from meta.model.arrays import text_step
from meta.model.kinds import JobKind

if TYPE_CHECKING:  # the spec models (pydantic) load only where a spec is validated here
    from meta.model.spec import AnySpec

T = TypeVar("T")
_NAME_JUNK = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class Submission:
    """Submission is what the translation reads besides options: the script (arguments bound) and the cwd."""

    cwd: str
    script_path: str | None = None
    script_text: str | None = None
    environ: Mapping[str, str] = field(default_factory=dict)  # the submitting shell's, for --export


@dataclass(frozen=True)
class Translation:
    """Translation is the spec's fields, the validated spec when asked for, and notes for the user.

    ``data`` is what the API validates on submit; ``spec`` is filled only by ``translate(...,
    validate=True)`` (``--test-only``, the tests), which imports the spec models.
    """

    data: dict[str, Any]
    spec: AnySpec | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def sanitise_name(raw: str) -> str:
    """sanitise_name maps any text onto the spec's name pattern (``my job!`` → ``my-job``)."""
    name = _NAME_JUNK.sub("-", raw).lstrip("._-")[:128].rstrip("-")
    return name or "msbatch-job"


# --- kind and shape -------------------------------------------------------------------------


def _parse_kind(text: str) -> JobKind:
    try:
        return JobKind(text.strip().lower())
    except ValueError:
        raise ValueError("expected training, inference or evaluation") from None


def job_kind(options: Options, nodes: int) -> JobKind:
    """job_kind applies the kind rules of the module docstring."""
    kind = parsed(options.get("kind"), _parse_kind) or JobKind.TRAINING
    if kind is JobKind.INFERENCE and not options.get("array"):
        raise SbatchError(["--kind=inference needs --array (one input partition per array index)"])
    if kind is not JobKind.TRAINING and nodes > 1:
        raise SbatchError([f"--nodes={nodes}: an {kind} job runs on one node; only training spans nodes"])
    return kind


def tasks_per_node(options: Options, nodes: int) -> int:
    """tasks_per_node reconciles ``--ntasks-per-node`` and ``--ntasks`` for ``nodes`` nodes."""
    per_node = parsed(options.get("ntasks-per-node"), parse_count)
    total_option = options.get("ntasks")
    total = parsed(total_option, parse_count)
    if total is None or total_option is None:
        return per_node or 1
    if per_node is None:
        if total % nodes:
            raise SbatchError([f"{total_option.where()} does not divide evenly over {nodes} nodes"])
        return total // nodes
    if total != per_node * nodes:
        raise SbatchError(
            [f"{total_option.where()} disagrees with --ntasks-per-node={per_node} × --nodes={nodes}"]
        )
    return per_node


def gpus_per_node(options: Options, nodes: int) -> GpuRequest | None:
    """gpus_per_node reads the GPU group; ``--gpus`` is a total split evenly over the nodes."""
    per_node = parsed(options.get("gres"), parse_gres) or parsed(
        options.get("gpus-per-node"), parse_gpu_request
    )
    if per_node:
        return per_node
    per_task = parsed(options.get("gpus-per-task"), parse_gpu_request)
    if per_task:
        return GpuRequest(per_task.count * tasks_per_node(options, nodes), per_task.gpu_type)
    total_option = options.get("gpus")
    total = parsed(total_option, parse_gpu_request)
    if total is None or total_option is None:
        return None
    if total.count % nodes:
        raise SbatchError([f"{total_option.where()} does not divide evenly over {nodes} nodes"])
    return GpuRequest(total.count // nodes, total.gpu_type)


def memory_per_node(options: Options, cpus: int, gpus: int) -> int:
    """memory_per_node reads the memory group in MiB (0 = no memory request)."""
    per_node = parsed(options.get("mem"), parse_size_mib)
    if per_node is not None:
        return per_node
    per_cpu = parsed(options.get("mem-per-cpu"), parse_size_mib)
    if per_cpu is not None:
        return per_cpu * cpus
    per_gpu_option = options.get("mem-per-gpu")
    per_gpu = parsed(per_gpu_option, parse_size_mib)
    if per_gpu is None or per_gpu_option is None:
        return 0
    if not gpus:
        raise SbatchError([f"{per_gpu_option.where()} needs GPUs (--gres, --gpus or --gpus-per-node)"])
    return per_gpu * gpus


def worker_resources(options: Options, nodes: int) -> dict[str, Any]:
    """worker_resources is one worker's request as spec fields (cpus, memory, typed GPUs)."""
    cpus = tasks_per_node(options, nodes) * (parsed(options.get("cpus-per-task"), parse_count) or 1)
    gpus = gpus_per_node(options, nodes)
    resources: dict[str, Any] = {"cpus": cpus}
    memory = memory_per_node(options, cpus, gpus.count if gpus else 0)
    if memory:
        resources["memory_mib"] = memory
    if gpus:
        resources["gpus"] = gpus.count
        if gpus.gpu_type:
            resources["gpu_type"] = gpus.gpu_type
    return resources


# --- identity, entry point, environment -----------------------------------------------------


def job_name(options: Options, submission: Submission) -> str:
    """job_name is ``--job-name``, else the script's file name (``wrap`` for ``--wrap``), sanitised."""
    given = options.value("job-name")
    if given:
        return sanitise_name(given)
    if submission.script_path:
        return sanitise_name(PurePosixPath(submission.script_path).name)  # sbatch: the file name, .sh and all
    return "wrap"


def tenant(options: Options) -> str:
    """tenant is the account; metasched charges every job to a tenant, so it is required."""
    account = options.value("account")
    if not account:
        raise SbatchError(
            ["no account: give -A/--account=<tenant> (or '#SBATCH --account=<tenant>' in the script)"]
        )
    return account


def partition(options: Options) -> str | None:
    """partition is ``--partition``; a list is refused because the spec names one partition."""
    option = options.get("partition")
    if option and "," in (option.value or ""):
        raise SbatchError([f"invalid {option.where()}: give one partition, not a list"])
    return option.value if option else None


def entry_point(options: Options, submission: Submission) -> dict[str, str]:
    """entry_point is ``script`` (the text) or ``command`` (``--wrap``), never both."""
    wrap = options.get("wrap")
    if wrap and submission.script_text is not None:
        raise SbatchError([f"{wrap.where()} runs a command; do not also give a script"])
    if wrap:
        return {"command": wrap.value or ""}
    if submission.script_text is None:
        raise SbatchError(["no script given: msbatch [OPTIONS] script.sh [args...] (or --wrap=CMD)"])
    return {"script": submission.script_text}


def _absolute(pattern: str, cwd: str) -> str:
    return os.path.normpath(os.path.join(cwd, pattern))


def environment(options: Options, cwd: str) -> dict[str, str]:
    """environment records what the spec has no field for, under MSBATCH_* (see the docstring)."""
    env = {"MSBATCH_SUBMIT_DIR": cwd}
    if options.value("comment"):
        env["MSBATCH_COMMENT"] = options.value("comment") or ""
    requested = parsed(options.get("signal"), parse_signal)
    if requested:
        env["MSBATCH_SIGNAL"] = requested.normalised()
        env["MSBATCH_SIGNAL_GRACE_S"] = str(requested.grace_s)
    return env


def node_count(options: Options) -> int:
    """node_count is ``-N``, else the number of ``-w`` nodes (as sbatch), else 1; -N and -w must agree."""
    nodes = parsed(options.get("nodes"), parse_nodes)
    listed = options.get("nodelist")
    named = len(set(expand_hostlist(listed.value or ""))) if listed else 0
    if nodes and named and nodes != named:
        raise SbatchError([f"{listed.where()} names {named} nodes but --nodes={nodes}: give as many nodes as -N"])  # type: ignore[union-attr]
    return nodes or named or 1


# --- inference ------------------------------------------------------------------------------


def inference_output(options: Options, name: str, cwd: str) -> tuple[str, list[str]]:
    """inference_output is the directory of ``--output`` (``%x`` expanded), else ``cwd/msbatch-out/name``."""
    default = os.path.join(cwd, "msbatch-out", name)
    pattern = options.value("output")
    if not pattern:
        return default, []
    directory = os.path.dirname(_absolute(pattern, cwd)).replace("%x", name)
    if "%" in directory:
        note = f"the directory of --output={pattern} has a % pattern; inference output goes to {default}"
        return default, [note]
    return directory, []


def inference_fields(options: Options, name: str, cwd: str) -> tuple[dict[str, Any], list[str]]:
    """inference_fields are partitions, max_parallel and output for an ``--array`` job."""
    array = parsed(options.get("array"), parse_array)
    assert array is not None  # job_kind made sure --array is there
    output, notes = inference_output(options, name, cwd)
    fields: dict[str, Any] = {"partitions": [str(index) for index in array.indexes], "output": output}
    if array.max_parallel is not None:
        fields["max_parallel"] = array.max_parallel
    return fields, notes


def array_fields(options: Options) -> dict[str, Any]:
    """array_fields is the ``array`` of a training or evaluation job given ``--array`` ({} without it)."""
    option = options.get("array")
    array = parsed(option, parse_array)
    if array is None or option is None:
        return {}
    fields: dict[str, Any] = {"indexes": list(array.indexes)}
    if array.max_parallel is not None:
        fields["max_parallel"] = array.max_parallel
    if text_step(option.value or "") > 1:
        fields["step"] = text_step(option.value or "")
    return {"array": fields}


# --- the whole translation ------------------------------------------------------------------


def kind_fields(
    kind: JobKind, options: Options, name: str, cwd: str, nodes: int
) -> tuple[dict[str, Any], list[str]]:
    """kind_fields are the fields only one kind has (workers, partitions, output)."""
    if kind is JobKind.TRAINING:
        return {"workers": nodes, **array_fields(options)}, []
    if kind is JobKind.INFERENCE:
        return inference_fields(options, name, cwd)
    return array_fields(options), []


def translate(options: Options, submission: Submission, *, validate: bool = True) -> Translation:
    """translate builds the JobSpec's fields for merged options, validated unless ``validate`` is False."""
    nodes = node_count(options)
    kind = job_kind(options, nodes)
    name = job_name(options, submission)
    data: dict[str, Any] = {"kind": kind.value, "name": name, "tenant": tenant(options)}
    data.update({k: v for k, v in (("qos", options.value("qos")), ("partition", partition(options))) if v})
    time_limit = parsed(options.get("time"), parse_time_s)
    if time_limit is not None:
        data["time_limit_s"] = time_limit
    data["resources"] = worker_resources(options, nodes)
    data.update(entry_point(options, submission))
    section, exported = sbatch_section(options, submission.cwd, submission.environ)
    data["env"] = {**exported, **environment(options, submission.cwd)}
    data["sbatch"] = section
    data.update(retry_fields(options))
    extra, notes = kind_fields(kind, options, name, submission.cwd, nodes)
    data.update(extra)
    data.update(gate_fields(options))  # --dependency, --kill-on-invalid-dep, --hold, --begin
    spec = validated(data) if validate else None
    return Translation(data, spec, tuple(notes))


def validated(data: dict[str, Any]) -> AnySpec:
    """validated runs the spec models over the fields; refusals become SbatchError ``invalid job: ...`` lines."""
    from meta.model.spec import SpecError, spec_from_dict

    try:
        return spec_from_dict(data)
    except SpecError as exc:
        raise SbatchError(spec_refusal(exc.problems)) from None


def spec_refusal(problems: list[str]) -> list[str]:
    """spec_refusal words a refused spec's problems as msbatch prints them (locally or from the API)."""
    return [f"invalid job: {problem}" for problem in problems]


def default_cwd() -> str:
    """default_cwd is the submission directory ($PWD when it is this directory, as the shell sees it)."""
    pwd = os.environ.get("PWD")
    if pwd and Path(pwd).resolve() == Path.cwd().resolve():
        return pwd  # keep the user's symlinked path, as sbatch does
    return str(Path.cwd())

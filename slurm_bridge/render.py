"""Render one sbatch script per attempt from a LaunchRequest.

Everything user-controlled is either checked to be a plain token (values in ``#SBATCH`` lines)
or shell-quoted with ``shlex.quote`` (environment values, the command). The user's command runs
through exactly one ``bash -c``, so it cannot change the script around it. Secrets appear by
name only (``METASCHED_SECRET_NAMES``): the job fetches their values from the API when it starts
(``metasched job secrets --export``), so no value is in the script, Slurm's records or the store.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterator

from meta.model.kinds import JobKind
from meta.model.resources import ResourceVector, format_memory
from slurm_bridge import hostlist, tags
from slurm_bridge.launch import LaunchRequest, Role, is_token

CHECKPOINT_SIGNAL = "USR1"
JOB_CLI = "metasched"  # the thin CLI, on the job's PATH (/usr/local/bin on the nodes)
SECRET_FETCH_FAILED = "metasched: cannot fetch the job's secrets from the metasched API (see above); the job does not start"
# The checkpoint signal's lead time is at most this fraction of the time limit. Slurm sends it
# when fewer than grace seconds remain, checked periodically (the man page: up to 60 s early),
# so a job loses up to grace + 60 s of its run to a signal it must answer by checkpointing and
# stopping. A site grace of 60 s suits the usual limits of an hour and more; on a 2-minute limit
# it would stop the job after a minute or less. A tenth keeps 90% of the limit for work and
# leaves the site's grace untouched from a 10-minute limit up.
MAX_GRACE_FRACTION = 0.1


def checkpoint_grace_s(grace_s: int, time_limit_s: int) -> int:
    """checkpoint_grace_s is the signal's lead time: the site's grace, capped to fit the time limit."""
    return min(grace_s, math.floor(time_limit_s * MAX_GRACE_FRACTION))


def format_time_limit(seconds: int) -> str:
    """format_time_limit renders seconds as Slurm's ``D-HH:MM:SS``."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"


def gres_option(per_node: ResourceVector) -> str | None:
    """gres_option is ``gpu:<type>:<n>`` (or ``gpu:<n>`` for any type), None without GPUs."""
    if not per_node.gpus:
        return None
    if per_node.gpu_type:
        return f"gpu:{per_node.gpu_type}:{per_node.gpus}"
    return f"gpu:{per_node.gpus}"


def render(request: LaunchRequest) -> str:
    """render returns the complete sbatch script for one attempt."""
    lines = ["#!/bin/bash", _banner(request)]
    lines += [f"#SBATCH {option}" for option in _options(request)]
    lines += list(_exports(request))
    if request.output_dir:
        # the job makes its own staging folder, as the user it runs as
        lines.append(f"mkdir -p -- {shlex.quote(request.output_dir)} || exit 1")
    lines.append(_launch_line(request))
    return "\n".join(lines) + "\n"


def _banner(request: LaunchRequest) -> str:
    """_banner is a comment saying what rendered the script and for which attempt."""
    return (
        f"# metasched attempt {request.attempt_id} (number {request.attempt_number}, "
        f"task {_one_line(request.task_id)}); rendered by slurm_bridge.render, do not edit"
    )


def _one_line(value: str) -> str:
    """_one_line makes a value safe inside a comment line (a newline would end the comment)."""
    return re.sub(r"[^A-Za-z0-9_./:@+-]", "_", value)


def _options(request: LaunchRequest) -> list[str]:
    """_options lists every #SBATCH option, with ``hetjob`` separators between roles."""
    head = [
        # the user's name, as sbatch would set it (SLURM_JOB_NAME, squeue's NAME); the tag is the comment
        f"--job-name={request.slurm_name or tags.job_name(request.attempt_id)}",
        f"--comment={tags.comment(request.site, request.attempt_id)}",
    ]
    tail = ["--no-requeue", *_signal_option(request), *_io_options(request), *request.user_options]
    first, *others = _components(request)
    options = head + _shape(request, first) + tail
    for role in others:
        options += ["hetjob"] + _shape(request, role)
    return options


def _signal_option(request: LaunchRequest) -> list[str]:
    """_signal_option asks Slurm for the checkpoint signal, only for a job that checkpoints."""
    # A program that does not trap USR1 dies of it (exit 138), so a job that never declared a
    # checkpoint gets no signal: it runs to its time limit as it would under plain sbatch.
    grace = checkpoint_grace_s(request.grace_s, request.time_limit_s)
    if not request.checkpoints or grace < 1:
        return []
    # B: signals the batch shell, which execs srun; srun forwards USR1 to every task.
    return [f"--signal=B:{CHECKPOINT_SIGNAL}@{grace}"]


def _components(request: LaunchRequest) -> tuple[Role, ...]:
    """_components are the het-job roles, or the request's own shape as a single component."""
    if request.roles:
        return request.roles
    single = Role(
        name="main",
        per_node=request.per_node,
        command=request.command or request.script or "",
        num_nodes=request.num_nodes,
        nodes=request.nodes,
        ntasks_per_node=request.ntasks_per_node,
        partition=request.partition,
    )
    return (single,)


def _shape(request: LaunchRequest, role: Role) -> list[str]:
    """_shape lists one component's account, QOS, partition, reservation, nodes and resources."""
    # Account, QOS and reservation are repeated in every het component rather than relying on
    # inheritance between components.
    partition = role.partition or request.partition
    options = [f"--account={request.tenant}"]
    options += [f"--qos={request.qos}"] if request.qos else []
    options += [f"--partition={partition}"] if partition else []
    options += [f"--reservation={request.reservation}"] if request.reservation else []
    options.append(f"--nodes={role.num_nodes}")
    options += [f"--nodelist={hostlist.compress(role.nodes)}"] if role.nodes else []
    if request.layout is not None:
        options += request.layout  # an sbatch job: the tasks as its user laid them out
    else:
        options.append(f"--ntasks-per-node={role.ntasks_per_node}")
        if role.per_node.cpus:
            options.append(f"--cpus-per-task={math.ceil(role.per_node.cpus / role.ntasks_per_node)}")
    if role.per_node.memory_mib:
        options.append(f"--mem={format_memory(role.per_node.memory_mib)}")
    gres = gres_option(role.per_node)
    options += [f"--gres={gres}"] if gres else []
    options.append(f"--time={format_time_limit(request.time_limit_s)}")
    return options


def _io_options(request: LaunchRequest) -> list[str]:
    """_io_options are --output/--error, defaulting into the output dir when one is given."""
    stdout, stderr = request.stdout, request.stderr
    if stdout is None and not request.sbatch_default_output and request.output_dir and is_token(request.output_dir):
        stdout = f"{request.output_dir.rstrip('/')}/slurm-%j.out"
    options = [f"--output={stdout}"] if stdout else []
    options += [f"--error={stderr}"] if stderr else []
    return options


def _exports(request: LaunchRequest) -> Iterator[str]:
    """_exports yields ``export NAME=<quoted>`` lines: metasched's variables, then the user's."""
    ours = {
        "METASCHED_ATTEMPT_ID": request.attempt_id,
        "METASCHED_ATTEMPT_NUMBER": str(request.attempt_number),
        "METASCHED_FENCING_TOKEN": str(request.fencing_token),
        "METASCHED_JOB_ID": request.job_id,
        "METASCHED_TASK_ID": request.task_id,
        "METASCHED_JOB_KIND": request.kind.value,
        "METASCHED_JOB_NAME": request.job_name,
        "METASCHED_TASK_NAME": request.task_name,
        "METASCHED_PARTITION": request.task_name if request.kind == JobKind.INFERENCE else None,
        "METASCHED_CHECKPOINT_DIR": request.checkpoint_dir,
        "METASCHED_OUTPUT_DIR": request.output_dir,
        "METASCHED_RESUME_FROM": request.resume_from,
        "METASCHED_SECRET_NAMES": ",".join(request.secret_names),
        "METASCHED_API": request.api_address,
        "METASCHED_ATTEMPT_SECRET": request.attempt_secret,
    }
    for name, value in ours.items():
        if value:
            yield f"export {name}={shlex.quote(value)}"
    for name in sorted(request.env):
        yield f"export {name}={shlex.quote(request.env[name])}"
    if request.secret_names:
        yield from _secret_fetch()


def _secret_fetch() -> Iterator[str]:
    """_secret_fetch asks the API for the declared secrets and exports them; a failure fails the job, saying why."""
    # the values reach this shell through a pipe: never the script, Slurm's records, argv or a file
    yield f'__metasched_secrets="$({JOB_CLI} job secrets --export)" || {{ echo "{SECRET_FETCH_FAILED}" >&2; exit 1; }}'
    yield 'eval "$__metasched_secrets"; unset __metasched_secrets'


def _launch_line(request: LaunchRequest) -> str:
    """_launch_line runs the user's command: under srun for gangs and het-jobs, directly otherwise."""
    if request.roles:
        parts = [
            f"--export=ALL,METASCHED_ROLE={role.name} bash -c {shlex.quote(role.command)}"
            for role in request.roles
        ]
        return "exec srun --kill-on-bad-exit=1 " + " : ".join(parts)
    if request.script:
        # a whole batch script (e.g. from msbatch) runs once and starts its own srun steps
        return f"exec bash -c {shlex.quote(request.script)}"
    body = f"bash -c {shlex.quote(request.command or '')}"
    if request.kind == JobKind.TRAINING or request.num_nodes > 1:
        return f"exec srun --kill-on-bad-exit=1 {body}"
    return f"exec {body}"

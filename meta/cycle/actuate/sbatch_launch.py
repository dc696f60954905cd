"""For step 13 (actuate): what an sbatch job's ``sbatch:`` section adds to its LaunchRequest.

Slurm itself acts on these: ``-o/-e`` go to it as patterns (it expands ``%j %x %u %N %A %a %%``
for each attempt, so ``%j`` is that attempt's Slurm job id), the open mode, mail, ``--export``
other than ALL, ``--exclusive`` and ``--constraint`` are passed on, and the task layout is the
user's (``--ntasks``, ``--ntasks-per-node``, ``--cpus-per-task``, or Slurm's defaults). The
job's ``SLURM_SUBMIT_DIR`` is the folder msbatch ran in, as sbatch sets it (the daemon calls
sbatch from elsewhere).
"""

from __future__ import annotations

from typing import Any

from meta.model.sbatch_fields import SbatchFields
from meta.model.spec import AnySpec
from meta.store.models import Job


def user_options(fields: SbatchFields) -> tuple[str, ...]:
    """user_options are the ``#SBATCH`` options the job's user asked for that Slurm acts on."""
    options = [f"--open-mode={fields.open_mode}"] if fields.open_mode else []
    options += [f"--mail-type={fields.mail_type}"] if fields.mail_type else []
    options += [f"--mail-user={fields.mail_user}"] if fields.mail_user else []
    options += ["--export=NONE"] if fields.export else []
    options += ["--exclusive"] if fields.exclusive else []
    options += [f"--constraint={fields.constraint}"] if fields.constraint else []
    return tuple(options)


def layout(fields: SbatchFields) -> tuple[str, ...]:
    """layout is the task layout as the user gave it (nothing: Slurm's defaults, one task per node)."""
    options = [f"--ntasks={fields.ntasks}"] if fields.ntasks else []
    options += [f"--ntasks-per-node={fields.ntasks_per_node}"] if fields.ntasks_per_node else []
    options += [f"--cpus-per-task={fields.cpus_per_task}"] if fields.cpus_per_task else []
    return tuple(options)


def sbatch_request_fields(job: Job, spec: AnySpec, as_user: bool) -> dict[str, Any]:
    """sbatch_request_fields are the LaunchRequest fields of an sbatch job ({} for other jobs)."""
    fields = spec.sbatch
    if fields is None:
        return {}
    out: dict[str, Any] = {"user_options": user_options(fields), "layout": layout(fields)}
    if fields.output or fields.error:
        out.update(stdout=fields.output, stderr=fields.error, sbatch_default_output=False)
        if fields.output is None:
            out["sbatch_default_output"] = as_user  # -e alone: stdout stays sbatch's default
    return out


def sbatch_env(job: Job, spec: AnySpec) -> dict[str, str]:
    """sbatch_env is what sbatch would have set that the daemon's sbatch cannot: SLURM_SUBMIT_DIR, SLURM_JOB_DEPENDENCY."""
    if spec.sbatch is None:
        return {}
    env = {"SLURM_SUBMIT_DIR": job.submit_dir} if job.submit_dir else {}
    if spec.dependency:
        env["SLURM_JOB_DEPENDENCY"] = spec.dependency  # with metasched's job ids, as msbatch was given them
    return env


def working_dir(job: Job, spec: AnySpec) -> str | None:
    """working_dir is ``--chdir`` when given, else the submit folder."""
    chdir = spec.sbatch.chdir if spec.sbatch else None
    return chdir or job.submit_dir

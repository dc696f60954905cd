"""log_paths says where each attempt of a job wrote its standard output and error, for ``metasched status``.

The same rules as the launch: an sbatch job's ``-o/-e`` patterns (``sbatch:`` in the spec) or
sbatch's default ``slurm-%j.out``, relative to the working folder (``--chdir``, else the submit
folder); stderr goes to stdout's file unless ``-e`` is given. Slurm expanded the patterns with
each attempt's own values: ``%j`` and ``%A`` are that attempt's Slurm id, ``%x`` the job name,
``%u`` the user, ``%N`` its first node; a pattern letter known only where the job ran (``%n``,
``%t``, ``%s``) is shown as written. A job that runs as the daemon's user (``runs_as_daemon``:
root's jobs when root runs serve, jobs without an owner) and gives no ``-o/-e`` writes
``<log folder>/<job>/<attempt>.out`` in the daemon's log folder (``serve --log-dir``), which the
API sends as ``log_dir``; shown as ``-`` when the status does not say (local mode).
"""

from __future__ import annotations

import os
from typing import Any

from slurm_bridge.output_patterns import expand_patterns

DEFAULT_OUTPUT = "slurm-%j.out"  # sbatch's


def _expand(pattern: str, values: dict[str, str], workdir: str | None) -> str:
    path = expand_patterns(pattern, values)
    if "\\" not in pattern:
        path = path.replace("%%", "%")  # what Slurm does last
    return path if path.startswith("/") or not workdir else os.path.normpath(os.path.join(workdir, path))


def daemon_log_path(log_dir: str, job_short_id: str, attempt_id: str) -> str:
    """daemon_log_path is where an attempt of the daemon's own job writes (the launch's ``--output``, launch_plan.py)."""
    return f"{log_dir.rstrip('/')}/{job_short_id}/{attempt_id}.out"


def attempt_logs(status: dict[str, Any], attempt: dict[str, Any]) -> tuple[str, str]:
    """attempt_logs is one attempt's (stdout, stderr) paths as the status JSON describes the job."""
    slurm_id = attempt.get("slurm_job_id")
    sbatch = (status.get("spec") or {}).get("sbatch") or {}
    output, error = sbatch.get("output"), sbatch.get("error")
    workdir = sbatch.get("chdir") or status.get("submit_dir")
    if not slurm_id:
        return "-", "-"
    if output is None and error is None and status.get("runs_as_daemon", not status.get("owner")):
        log_dir = status.get("log_dir")
        if not log_dir or not attempt.get("id"):
            return "-", "-"
        path = daemon_log_path(log_dir, status.get("short_id", ""), attempt["id"])
        return path, path
    values = {"j": str(slurm_id), "x": status.get("name", ""), "u": status.get("owner") or ""}
    if not (status.get("spec") or {}).get("array"):
        values["A"] = str(slurm_id)
    if attempt.get("nodes"):
        values["N"] = attempt["nodes"][0]
    stdout = _expand(output or DEFAULT_OUTPUT, values, workdir)
    return stdout, _expand(error, values, workdir) if error else stdout

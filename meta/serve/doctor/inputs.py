"""What one doctor run is told: the daemon's settings (as ``serve`` reads them), the store, slurm.conf, its bounds."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from meta.serve.doctor.conf_file import slurm_conf_path
from meta.serve.settings import ServeSettings
from meta.store.db import DatabaseURLError, resolve_url
from slurm_bridge.runner import CommandRunner

DEADLINE_S = 30.0  # the whole run: an admin waits for it, a unit's ExecStartPre may too
COMMAND_TIMEOUT_S = 8.0  # one Slurm or MUNGE command; a healthy one answers in well under a second
SRUN_TIMEOUT_S = 20.0  # the job API probe: an allocation (at most SRUN_IMMEDIATE_S) plus one connection
SRUN_IMMEDIATE_S = 10  # srun --immediate: give up when no node is free this long, rather than queue
CONNECT_TIMEOUT_S = 5.0  # one connection: the store, the job API


@dataclass(frozen=True)
class DoctorInputs:
    """DoctorInputs are one run's inputs: the settings ``serve`` would run with, the store URL and slurm.conf."""

    settings: ServeSettings
    db_url: str
    slurm_conf: Path
    probe_partition: str | None = None  # where the job API probe runs; None: Slurm's default partition
    deadline_s: float = DEADLINE_S


def slurm_runner(inputs: DoctorInputs) -> CommandRunner:
    """slurm_runner runs Slurm's commands as the daemon would (``slurm_bin_dir``), on the slurm.conf checked."""
    env = {**os.environ, "SLURM_CONF": str(inputs.slurm_conf)}
    return CommandRunner(bin_dir=inputs.settings.slurm_bin_dir, env=env, default_timeout_s=COMMAND_TIMEOUT_S)


class DoctorInputError(ValueError):
    """DoctorInputError is an input the doctor cannot run with (exit 2): a store URL that is not one."""


def make_inputs(settings: ServeSettings, db_url: str | None, slurm_conf: str | None,
                probe_partition: str | None = None) -> DoctorInputs:  # fmt: skip
    """make_inputs resolves the store URL as ``serve`` does and slurm.conf as Slurm's commands do (DoctorInputError)."""
    try:
        url = resolve_url(db_url)
    except DatabaseURLError as exc:
        raise DoctorInputError(f"bad --db: {exc}") from None
    return DoctorInputs(settings, url, slurm_conf_path(slurm_conf), probe_partition or None)

"""CliSlurmClient: the default SlurmClient, built on the Slurm command-line tools.

Reads use the forms that work on 22.05: ``squeue --Format`` fields (``--json`` renders every
job in memory and ignores filters: far slower, see parse.squeue), ``sinfo --json``, ``sacct -P``
text (its JSON loses exit codes), ``scontrol -o`` key=value lines.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from slurm_bridge import adoption
from slurm_bridge import reservations as resv
from slurm_bridge.errors import ReservationInUse, SlurmParseError, SlurmRejected
from slurm_bridge.job_env import submission_env
from slurm_bridge.launch import RunAs
from slurm_bridge.parse.config import SlurmConfig, parse_show_config
from slurm_bridge.parse.sacct import SACCT_FIELDS, SacctJob, parse_sacct, parse_sacct_ids, unforged_records
from slurm_bridge.parse.sacctmgr import (
    AccountShares,
    UserAssociations,
    account_shares_args,
    parse_account_shares,
    parse_qos_names,
    parse_registered_clusters,
    parse_user_associations,
    registered_clusters_args,
    user_associations_args,
)
from slurm_bridge.parse.scontrol import (
    ScontrolJob,
    ScontrolNode,
    SlurmReservation,
    parse_show_job,
    parse_show_node,
    parse_show_reservation,
)
from slurm_bridge.parse.sdiag import Sdiag, parse_sdiag
from slurm_bridge.parse.sinfo import SinfoNode, parse_sinfo_json
from slurm_bridge.parse.squeue import (
    SqueueJob,
    job_ids_args,
    parse_job_ids,
    parse_squeue_entries,
    parse_squeue_text,
    squeue_format_args,
    unforged,
)
from slurm_bridge.parse.topology import Switch, parse_topology
from slurm_bridge.runner import CommandRunner

T = TypeVar("T")
_JOB_ID_TEXT = re.compile(r"^\d+(?:[+_]\d+)?$")
_PARSABLE_ID = re.compile(r"^(\d+)(?:;\S+)?$")
# scancel of a job that already ended is success for an idempotent cancel.
_ALREADY_GONE = re.compile(r"already completing or completed|invalid job id", re.IGNORECASE)
_RESERVATION_GONE = re.compile(
    r"invalid reservation|reservation.*not found|requested reservation is invalid", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Timeouts per command class, in seconds."""

    submit: float = 30.0
    cancel: float = 30.0
    read: float = 30.0
    accounting: float = 60.0
    reservation: float = 30.0


def parse_job_id(output: str) -> int:
    """parse_job_id reads ``sbatch --parsable`` output (``123`` or ``123;cluster``)."""
    line = output.strip().splitlines()[-1].strip() if output.strip() else ""
    match = _PARSABLE_ID.match(line)
    if not match:
        raise SlurmParseError(f"sbatch --parsable: no job id in {output.strip()[:200]!r}")
    return int(match.group(1))


def _only_already_gone(stderr: str) -> bool:
    """_only_already_gone: every error line says the job already ended (so the cancel is done)."""
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    return bool(errors) and all(_ALREADY_GONE.search(line) for line in errors)


def slurm_time(moment: datetime) -> str:
    """slurm_time renders a datetime as local time without offset, as sacct -S/-E expect."""
    local = moment.astimezone() if moment.tzinfo else moment
    return local.replace(tzinfo=None, microsecond=0).isoformat()


class CliSlurmClient:
    """CliSlurmClient implements SlurmClient with sbatch, scancel, squeue, sinfo, sacct, scontrol, sdiag."""

    def __init__(self, runner: CommandRunner | None = None, timeouts: Timeouts | None = None) -> None:
        self.runner = runner or CommandRunner()
        self.timeouts = timeouts or Timeouts()

    def submit(self, script: str, *, timeout_s: float | None = None, run_as: RunAs | None = None) -> int:
        """submit pipes the script into ``sbatch --parsable`` (as ``run_as`` when given) and returns the job id.

        The job's environment is the daemon's without its private variables, or the user's
        (``slurm_bridge.job_env``): it never carries the store's URL.
        """
        args = ["--parsable", *(run_as.sbatch_args() if run_as else [])]
        result = self.runner.run(
            "sbatch", args, stdin=script, timeout_s=timeout_s or self.timeouts.submit, mutating=True,
            env=submission_env(self.runner.env, run_as),
        )  # fmt: skip
        return parse_job_id(result.stdout)

    def cancel(self, job_ids: Sequence[int | str], signal: str | None = None) -> None:
        """cancel runs scancel; with ``signal`` it only signals the batch step (``--batch``).

        Rendered scripts ``exec srun``, so the batch step is srun, which forwards the signal to
        every task exactly once (measured on 22.05: ``--full`` also signals the steps directly, and
        the job was terminated).
        """
        ids = [str(job_id) for job_id in job_ids]
        bad = [job_id for job_id in ids if not _JOB_ID_TEXT.match(job_id)]
        if bad:
            raise ValueError(f"not Slurm job ids: {bad}")
        if not ids:
            return
        args = [f"--signal={signal}", "--batch"] if signal else []
        try:
            self.runner.run("scancel", args + ids, timeout_s=self.timeouts.cancel, mutating=True)
        except SlurmRejected as error:
            if not _only_already_gone(error.stderr or str(error)):
                raise

    def squeue(self) -> list[SqueueJob]:
        """squeue lists every job slurmctld holds as ``--Format`` fields (not ``--json``: see parse.squeue).

        A second, id-only read (no free text) drops the rows a job name forged (``unforged``);
        it comes after the first, so a job submitted in between is only missing until the next read.
        """
        timeout = self.timeouts.read
        jobs = self.runner.run_parsed("squeue", squeue_format_args(), parse_squeue_text, timeout_s=timeout)
        return unforged(jobs, self.runner.run_parsed("squeue", job_ids_args(), parse_job_ids, timeout_s=timeout))

    def squeue_json(self) -> list[dict[str, Any]]:
        """squeue_json runs ``squeue --json`` (every job; for adoption: free text cannot forge a field there)."""
        timeout = self.timeouts.read
        return self.runner.run_parsed("squeue", ["--json"], parse_squeue_entries, timeout_s=timeout)

    def sinfo(self) -> list[SinfoNode]:
        """sinfo runs ``sinfo --json``; nodes are deduplicated by the parser."""
        return self.runner.run_parsed("sinfo", ["--json"], parse_sinfo_json, timeout_s=self.timeouts.read)

    def sacct(self, since: datetime, until: datetime | None = None) -> list[SacctJob]:
        """sacct runs ``sacct -a -n -P -X`` over [since, until] and parses it leniently."""
        args = ["-a", "-n", "-P", "-X", "-o", ",".join(SACCT_FIELDS), "-S", slurm_time(since)]
        if until is not None:
            args += ["-E", slurm_time(until)]
        # One odd record (e.g. a foreign job name with '|') must not blind the reconciler.
        parse = functools.partial(parse_sacct, fields=SACCT_FIELDS, strict=False)
        records = self.runner.run_parsed("sacct", args, parse, timeout_s=self.timeouts.accounting)
        # the ids alone (no free text) drop rows a job name forged; after the first read, so a job
        # that enters the window in between is only missing until the next read
        id_args = ["-a", "-n", "-P", "-X", "-o", "JobID", *args[args.index("-S") :]]
        ids = self.runner.run_parsed("sacct", id_args, parse_sacct_ids, timeout_s=self.timeouts.accounting)
        return unforged_records(records, ids)

    def release_held(self, job_id: int | str, nodes: Sequence[str], comment: str) -> None:
        """release_held puts a held job on ``nodes`` with ``comment`` and releases it (scontrol update, release)."""
        for args in adoption.release_commands(job_id, nodes, comment):
            self.runner.run("scontrol", args, timeout_s=self.timeouts.submit, mutating=True)

    def set_comment(self, job_id: int | str, comment: str) -> None:
        """set_comment sets a job's comment (``scontrol update JobId=N Comment=...``)."""
        self.runner.run("scontrol", adoption.comment_command(job_id, comment), timeout_s=self.timeouts.cancel,
                        mutating=True)  # fmt: skip

    def show_nodes(self) -> list[ScontrolNode]:
        """show_nodes runs ``scontrol -o show node``."""
        return self._scontrol(["-o", "show", "node"], parse_show_node)

    def show_jobs(self) -> list[ScontrolJob]:
        """show_jobs runs ``scontrol -o show job``."""
        return self._scontrol(["-o", "show", "job"], parse_show_job)

    def topology(self) -> dict[str, Switch]:
        """topology runs ``scontrol show topology``."""
        return self._scontrol(["show", "topology"], parse_topology)

    def qos_names(self) -> list[str]:
        """qos_names runs ``sacctmgr -n -P show qos format=Name``."""
        return self.runner.run_parsed(
            "sacctmgr", ["-n", "-P", "show", "qos", "format=Name"], parse_qos_names, timeout_s=self.timeouts.accounting
        )

    def registered_clusters(self) -> list[str]:
        """registered_clusters runs ``sacctmgr -n -P show clusters``: the clusters slurmdbd can reach."""
        return self.runner.run_parsed(
            "sacctmgr", registered_clusters_args(), parse_registered_clusters, timeout_s=self.timeouts.accounting
        )

    def user_associations(self, user: str | None = None) -> list[UserAssociations]:
        """user_associations runs ``sacctmgr -n -P show user [name=U] withcoord withassoc format=...``."""
        return self.runner.run_parsed(
            "sacctmgr", user_associations_args(user), parse_user_associations, timeout_s=self.timeouts.accounting
        )

    def account_shares(self) -> list[AccountShares]:
        """account_shares runs ``sacctmgr -n -P show assoc format=Cluster,Account,User,Fairshare,GrpTRES,...``."""
        return self.runner.run_parsed(
            "sacctmgr", account_shares_args(), parse_account_shares, timeout_s=self.timeouts.accounting
        )

    def slurm_config(self) -> SlurmConfig:
        """slurm_config runs ``scontrol show config``."""
        return self._scontrol(["show", "config"], parse_show_config)

    def reservations(self) -> list[SlurmReservation]:
        """reservations runs ``scontrol -o show reservation``."""
        return self._scontrol(["-o", "show", "reservation"], parse_show_reservation)

    def create_reservation(self, spec: resv.ReservationSpec) -> str:
        """create_reservation runs ``scontrol create reservation ...`` and returns the name."""
        result = self.runner.run(
            "scontrol", resv.create_args(spec), timeout_s=self.timeouts.reservation, mutating=True
        )
        return resv.parse_created(result.stdout + result.stderr)

    def update_reservation(self, spec: resv.ReservationSpec, *, move_start: bool = True) -> None:
        """update_reservation runs ``scontrol update ReservationName=...``."""
        self.runner.run(
            "scontrol",
            resv.update_args(spec, move_start=move_start),
            timeout_s=self.timeouts.reservation,
            mutating=True,
        )

    def delete_reservation(self, name: str) -> None:
        """delete_reservation runs ``scontrol delete ReservationName=...``; absent is fine, in use raises."""
        try:
            self.runner.run(
                "scontrol", resv.delete_args(name), timeout_s=self.timeouts.reservation, mutating=True
            )
        except SlurmRejected as error:
            text = str(error) + error.stderr
            if "in use" in text.lower():
                raise ReservationInUse(
                    str(error), command="scontrol", argv=error.argv, stderr=error.stderr
                ) from error
            if not _RESERVATION_GONE.search(text):
                raise

    def sdiag(self) -> Sdiag:
        """sdiag runs ``sdiag``."""
        return self.runner.run_parsed("sdiag", [], parse_sdiag, timeout_s=self.timeouts.read)

    def _scontrol(self, args: list[str], parse: Callable[[str], T]) -> T:
        """_scontrol runs a read-only scontrol command and parses its output."""
        return self.runner.run_parsed("scontrol", args, parse, timeout_s=self.timeouts.read)

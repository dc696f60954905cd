"""SlurmClient: the interface the rest of metasched uses to speak to Slurm."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from slurm_bridge.launch import RunAs
from slurm_bridge.parse.config import SlurmConfig
from slurm_bridge.parse.sacct import SacctJob
from slurm_bridge.parse.sacctmgr import AccountShares, UserAssociations
from slurm_bridge.parse.scontrol import ScontrolJob, ScontrolNode, SlurmReservation
from slurm_bridge.parse.sdiag import Sdiag
from slurm_bridge.parse.sinfo import SinfoNode
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.parse.topology import Switch
from slurm_bridge.reservations import ReservationSpec


class SlurmClient(Protocol):
    """SlurmClient submits, cancels and observes Slurm jobs, nodes and reservations."""

    def submit(
        self, script: str, *, timeout_s: float | None = None, run_as: RunAs | None = None
    ) -> int | str:
        """submit runs sbatch on the script text (as ``run_as``'s user when given) and returns the Slurm job id.

        One cluster: the numeric id. Several (``slurm_bridge.clusters.ClusterSet``): the ref ``<cluster>/<id>``.
        """
        ...

    def cancel(self, job_ids: Sequence[int | str], signal: str | None = None) -> None:
        """cancel cancels (or signals) jobs; jobs that already ended are not an error."""
        ...

    def squeue(self) -> list[SqueueJob]:
        """squeue lists every job the controller knows (filter on the client side)."""
        ...

    def squeue_json(self) -> list[dict[str, Any]]:
        """squeue_json is ``squeue --json``'s job objects (every job): fields free text cannot forge, for adoption."""
        ...

    def release_held(self, job_id: int | str, nodes: Sequence[str], comment: str) -> None:
        """release_held puts a held job (plain sbatch, adopted) on ``nodes`` with ``comment`` and releases it."""
        ...

    def set_comment(self, job_id: int | str, comment: str) -> None:
        """set_comment sets a job's comment."""
        ...

    def sinfo(self) -> list[SinfoNode]:
        """sinfo lists every node once."""
        ...

    def sacct(self, since: datetime, until: datetime | None = None) -> list[SacctJob]:
        """sacct lists accounting records of job allocations in a time window."""
        ...

    def show_nodes(self) -> list[ScontrolNode]:
        """show_nodes is ``scontrol -o show node``."""
        ...

    def show_jobs(self) -> list[ScontrolJob]:
        """show_jobs is ``scontrol -o show job``."""
        ...

    def topology(self) -> dict[str, Switch]:
        """topology is the switch tree keyed by switch name ({} without topology/tree)."""
        ...

    def qos_names(self) -> list[str]:
        """qos_names lists the QOS names accounting knows (``sacctmgr show qos``)."""
        ...

    def registered_clusters(self) -> list[str]:
        """registered_clusters are the clusters the accounting database serves whose controller registered."""
        ...

    def user_associations(self, user: str | None = None) -> list[UserAssociations]:
        """user_associations reads one user's (or every user's) accounts, default account, admin level, coordinators."""
        ...

    def account_shares(self) -> list[AccountShares]:
        """account_shares reads every account's Fairshare and GrpTRES (``sacctmgr show assoc``)."""
        ...

    def slurm_config(self) -> SlurmConfig:
        """slurm_config reads the cluster name and SlurmUser (``scontrol show config``)."""
        ...

    def reservations(self) -> list[SlurmReservation]:
        """reservations lists Slurm's reservations."""
        ...

    def create_reservation(self, spec: ReservationSpec) -> str:
        """create_reservation creates a reservation and returns its name."""
        ...

    def update_reservation(self, spec: ReservationSpec, *, move_start: bool = True) -> None:
        """update_reservation moves a reservation to the spec's nodes and duration (and start, unless started)."""
        ...

    def delete_reservation(self, name: str) -> None:
        """delete_reservation deletes a reservation; an absent one is not an error."""
        ...

    def sdiag(self) -> Sdiag:
        """sdiag reads the controller's statistics."""
        ...

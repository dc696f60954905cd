"""FakeSlurm: an in-memory SlurmClient for tests, benchmarks and fault injection (never for real-Slurm suites).

It ships beside ``faults`` (as Nomad ships its scheduler harness) so that benchmarks and other
tools drive the daemon without importing the test tree. It keeps the jobs it was given, reads the identity back from the rendered script
(``--comment`` tag, ``--job-name``, ``--nodelist``), and answers squeue/sacct/sinfo with
the same parsed types the command adapters return. Tests drive it: ``start``/``finish`` move a
job, ``advance`` moves every job one step, and fault switches make the next calls fail. One fake
may serve several daemons at once (two metasched sites sharing a cluster): each job keeps the
site its tag names (``FakeJob.site``, ``jobs_of_site``).
"""

from __future__ import annotations

import os
import pwd
import re
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from slurm_bridge import hostlist
from slurm_bridge.errors import SlurmRejected, SlurmTransient, SlurmUnknownOutcome
from slurm_bridge.launch import RunAs
from slurm_bridge.parse.config import SlurmConfig
from slurm_bridge.parse.nodestate import node_condition
from slurm_bridge.parse.sacct import SacctJob
from slurm_bridge.parse.sacctmgr import AccountShares, UserAssociations, gpu_limits
from slurm_bridge.parse.scontrol import SlurmReservation
from slurm_bridge.parse.sinfo import SinfoNode
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.parse.topology import Switch
from slurm_bridge.parse.tres import Gres, Tres
from slurm_bridge.reservations import ReservationSpec
from slurm_bridge.states import map_state
from slurm_bridge.tags import parse_tag, tag_key

ACTIVE = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"}
# the submit faults a test can queue
UNKNOWN_BEFORE = "unknown_before"  # sbatch timed out before slurmctld took the job
UNKNOWN_AFTER = "unknown_after"  # slurmctld took the job, the reply was lost
REJECTED = "rejected"
TRANSIENT = "transient"

_OPTION = re.compile(r"^#SBATCH\s+(\S+)\s*$")


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class FakeJob:
    """FakeJob is one job (all its het components) as the fake controller holds it."""

    job_id: int
    name: str
    comment: str
    script: str
    account: str
    components: list[tuple[str, ...]]  # nodes per het component (one entry for a plain job)
    submitted_at: datetime
    state: str = "PENDING"
    exit_code: int | None = None
    signal: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    signals: list[str] = field(default_factory=list)  # signals sent with scancel -s
    in_squeue: bool = True  # squeue still lists it (ended jobs linger for MinJobAge)
    in_sacct: bool = True  # slurmdbd has its record
    ticks: int = 0
    cancelled_by: int | None = None  # sacct's ``CANCELLED by <uid>`` (None: accounting does not say)
    uid: int = field(default_factory=os.geteuid)  # the user it runs as: sbatch's (the test's), or run_as

    @property
    def nodes(self) -> tuple[str, ...]:
        """nodes are all nodes of the job, every component included."""
        return tuple(node for component in self.components for node in component)

    @property
    def active(self) -> bool:
        """active tells whether the job still holds (or waits for) nodes."""
        return self.state in ACTIVE

    @property
    def attempt_id(self) -> str:
        """attempt_id is read back from the job's tag (its comment; the ``ms-<attempt>`` name of older jobs)."""
        tag = parse_tag(self.name, self.comment)
        return tag.attempt_id if tag else self.name

    @property
    def site(self) -> str | None:
        """site is the metasched site the job's tag names (None: untagged, or a tag older than sites)."""
        tag = parse_tag(self.name, self.comment)
        return tag.site if tag else None

    @property
    def key(self) -> str:
        """key is ``ms-<attempt>`` for a metasched job, else the job's name (as the harnesses key jobs)."""
        return tag_key(self.name, self.comment)


def parse_script(script: str) -> tuple[str, str, str, list[tuple[str, ...]]]:
    """parse_script reads job name, comment, account and nodes per component from #SBATCH lines."""
    name = comment = account = ""
    components: list[tuple[str, ...]] = [()]
    for line in script.splitlines():
        match = _OPTION.match(line.strip())
        if not match:
            continue
        option = match.group(1)
        if option == "hetjob":
            components.append(())
            continue
        key, _, value = option.partition("=")
        if key == "--job-name":
            name = value
        elif key == "--comment":
            comment = value
        elif key == "--account" and not account:
            account = value
        elif key == "--nodelist":
            components[-1] = tuple(hostlist.expand(value))
    return name, comment, account, components


def sinfo_node(
    name: str,
    *,
    gpus: int = 8,
    gpu_type: str = "a100",
    cpus: int = 64,
    memory_mib: int = 512 * 1024,
    state: str = "IDLE",
    flags: Sequence[str] = (),
    partitions: tuple[str, ...] = ("gpu",),
) -> SinfoNode:
    """sinfo_node builds one SinfoNode of a GPU node."""
    return SinfoNode(
        name=name,
        state=state,
        condition=node_condition(state, flags),
        gres=(Gres("gpu", gpu_type, gpus),) if gpus else (),
        gres_used=(),
        cpus=cpus,
        alloc_cpus=0,
        real_memory_mib=memory_mib,
        alloc_memory_mib=0,
        partitions=partitions,
        features=frozenset({gpu_type}) if gpus else frozenset(),
        reason="",
    )


def small_cluster(count: int = 4, **kw: object) -> list[SinfoNode]:
    """small_cluster is ``count`` nodes node1..nodeN with 8 A100 each (by default)."""
    return [sinfo_node(f"node{i}", **kw) for i in range(1, count + 1)]  # type: ignore[arg-type]


class FakeSlurm:
    """FakeSlurm implements the SlurmClient methods the daemon uses, in memory."""

    def __init__(self, nodes: Sequence[SinfoNode] | None = None, *, first_job_id: int = 1000):
        self.nodes: dict[str, SinfoNode] = {n.name: n for n in (nodes if nodes is not None else small_cluster())}
        self.jobs: dict[int, FakeJob] = {}
        self._next_id = first_job_id
        self.switches: dict[str, Switch] = {}
        self.slurm_reservations: dict[str, SlurmReservation] = {}
        self.qos: list[str] = ["normal", "low", "high"]  # as deploy/devcluster creates them
        # accounting: none by default (tests add users and accounts); the one cluster is "fake"
        self.config = SlurmConfig(cluster_name="fake", slurm_user="slurm", slurm_user_uid=64030)
        self.users: dict[str, UserAssociations] = {}
        self.accounts: dict[str, AccountShares] = {}
        self.accounting_fault: Exception | None = None  # sacctmgr (slurmdbd) fails
        self.registered: list[str] | None = None  # sacctmgr show clusters (None: this cluster alone)
        # calls, for assertions
        self.submitted_scripts: list[str] = []  # every script handed to submit (accepted or not)
        self.submitted_as: list[RunAs | None] = []  # the user each of them was submitted as
        self.cancels: list[tuple[str, str | None]] = []  # (job id, signal)
        self.calls: dict[str, int] = {"submit": 0, "cancel": 0, "squeue": 0, "sacct": 0, "sinfo": 0,
                                      "user_associations": 0, "account_shares": 0, "registered_clusters": 0}
        # faults
        self.submit_faults: deque[str] = deque()
        self.squeue_fault: Exception | None = None
        self._listed: dict[int, tuple[tuple[Any, ...], list[SqueueJob]]] = {}  # job id -> (what it shows, its rows)
        self.sacct_fault: Exception | None = None
        self.cancel_fault: Exception | None = None  # scancel (with or without a signal) fails
        # how a job ends when advance() finishes it: (state, exit code) by attempt id
        self.outcome: Callable[[FakeJob], tuple[str, int]] = lambda job: ("COMPLETED", 0)
        self.run_ticks = 1  # advance() calls a job stays RUNNING before it ends
        self.auto_advance = False  # advance() at every squeue call (for Daemon.run loops)
        self.on_submit: Callable[[], None] | None = None  # runs at each submit (e.g. to move a clock)
        # the daemon's launch pool calls submit from its threads while the period reads squeue
        self._lock = threading.RLock()

    # --- SlurmClient ------------------------------------------------------------------------

    def submit(self, script: str, *, timeout_s: float | None = None, run_as: RunAs | None = None) -> int:
        """submit records the job (or fails as the next queued fault says) and returns its id."""
        with self._lock:
            self.calls["submit"] += 1
            self.submitted_scripts.append(script)
            self.submitted_as.append(run_as)
        if self.on_submit is not None:
            self.on_submit()  # outside the lock: a test's hook may wait for another submit
        with self._lock:
            return self._submit(script, run_as.uid if run_as is not None else None)

    def _submit(self, script: str, uid: int | None = None) -> int:
        """_submit fails as the next queued fault says, or records the job (under the lock)."""
        fault = self.submit_faults.popleft() if self.submit_faults else None
        if fault == UNKNOWN_BEFORE:
            raise SlurmUnknownOutcome("sbatch timed out", command="sbatch")
        if fault == REJECTED:
            raise SlurmRejected("sbatch: error: Invalid account or account/partition combination", command="sbatch")
        if fault == TRANSIENT:
            raise SlurmTransient("sbatch: error: Slurm controller not responding", command="sbatch")
        job = self._record(script, uid)
        if fault == UNKNOWN_AFTER:
            raise SlurmUnknownOutcome("sbatch reply lost", command="sbatch")
        return job.job_id

    def cancel(self, job_ids: Sequence[int | str], signal: str | None = None, as_uid: int | None = 0) -> None:
        """cancel signals jobs (``signal``) or cancels them as ``as_uid`` (the daemon: root); ended jobs are no error."""
        with self._lock:
            self._cancel(job_ids, signal, as_uid)

    def _cancel(self, job_ids: Sequence[int | str], signal: str | None, as_uid: int | None) -> None:
        self.calls["cancel"] += 1
        if self.cancel_fault is not None:
            raise self.cancel_fault
        for raw in job_ids:
            self.cancels.append((str(raw), signal))
            job = self.jobs.get(int(raw))
            if job is None or not job.active:
                continue
            if signal:
                job.signals.append(signal)
            else:
                self._end(job, "CANCELLED", 0, signal=15)
                job.cancelled_by = as_uid

    def squeue(self) -> list[SqueueJob]:
        """squeue lists the jobs the controller still knows, het components separately."""
        with self._lock:
            self.calls["squeue"] += 1
            if self.squeue_fault is not None:
                raise self.squeue_fault
            if self.auto_advance:
                self.advance()
            out: list[SqueueJob] = []
            for job in list(self.jobs.values()):
                if job.in_squeue:
                    out.extend(self._squeue_records(job))
            return out

    def sacct(self, since: datetime, until: datetime | None = None) -> list[SacctJob]:
        """sacct lists allocation records (and a .batch step) of jobs active in the window."""
        with self._lock:
            return self._sacct_jobs(since, until)

    def _sacct_jobs(self, since: datetime, until: datetime | None) -> list[SacctJob]:
        self.calls["sacct"] += 1
        if self.sacct_fault is not None:
            raise self.sacct_fault
        out: list[SacctJob] = []
        for job in list(self.jobs.values()):
            if not job.in_sacct:
                continue
            if job.ended_at is not None and job.ended_at < since:
                continue
            if until is not None and job.submitted_at > until:
                continue
            out.extend(self._sacct_records(job))
        return out

    def sinfo(self) -> list[SinfoNode]:
        """sinfo lists every node once."""
        self.calls["sinfo"] += 1
        return list(self.nodes.values())

    def topology(self) -> dict[str, Switch]:
        """topology is the configured switch tree ({} by default)."""
        return dict(self.switches)

    def qos_names(self) -> list[str]:
        """qos_names lists the QOS the fake's accounting knows."""
        return list(self.qos)

    def registered_clusters(self) -> list[str]:
        """registered_clusters are the clusters set in ``registered`` (its own cluster by default)."""
        self.calls["registered_clusters"] += 1
        if self.accounting_fault is not None:
            raise self.accounting_fault
        return list(self.registered) if self.registered is not None else [self.config.cluster_name]

    def user_associations(self, user: str | None = None) -> list[UserAssociations]:
        """user_associations lists the configured users (one, when named; [] for an unknown one)."""
        self.calls["user_associations"] += 1
        if self.accounting_fault is not None:
            raise self.accounting_fault
        if user is not None:
            return [self.users[user]] if user in self.users else []
        return list(self.users.values())

    def account_shares(self) -> list[AccountShares]:
        """account_shares lists the configured accounts' Fairshare and GrpTRES."""
        self.calls["account_shares"] += 1
        if self.accounting_fault is not None:
            raise self.accounting_fault
        return list(self.accounts.values())

    def slurm_config(self) -> SlurmConfig:
        """slurm_config is the configured cluster name and SlurmUser."""
        return self.config

    def reservations(self) -> list[SlurmReservation]:
        """reservations lists the reservations (head-of-line holds) the fake holds."""
        self.calls["reservations"] = self.calls.get("reservations", 0) + 1
        return list(self.slurm_reservations.values())

    def create_reservation(self, spec: ReservationSpec) -> str:
        """create_reservation stores a reservation; a name in use is refused as Slurm does."""
        if spec.name in self.slurm_reservations:
            raise SlurmRejected(f"Reservation request denied: duplicate name {spec.name}", command="scontrol")
        self.slurm_reservations[spec.name] = self._reservation(spec, spec.start or _now())
        return spec.name

    def update_reservation(self, spec: ReservationSpec, *, move_start: bool = True) -> None:
        """update_reservation moves a reservation's nodes and duration (and start, unless started)."""
        existing = self.slurm_reservations.get(spec.name)
        if existing is None:
            raise SlurmRejected(f"Reservation {spec.name} not found", command="scontrol")
        start = (spec.start or _now()) if move_start else (existing.start or _now())
        self.slurm_reservations[spec.name] = self._reservation(spec, start)

    def delete_reservation(self, name: str) -> None:
        """delete_reservation removes a reservation; an absent one is no error."""
        self.slurm_reservations.pop(name, None)

    # --- test controls ------------------------------------------------------------------------

    def add_user(
        self,
        name: str,
        accounts: Sequence[str],
        *,
        default: str | None = None,
        coordinates: Sequence[str] = (),
        admin_level: str = "None",
        qos: Sequence[str] = (),
    ) -> UserAssociations:
        """add_user gives a user associations in ``accounts`` (the first is the default unless named), each allowing ``qos``."""
        cluster = self.config.cluster_name
        user = UserAssociations(
            user=name,
            default_account=default if default is not None else (accounts[0] if accounts else ""),
            admin_level=admin_level,
            coordinates=frozenset(coordinates),
            associations=frozenset((cluster, a) for a in accounts),
            association_qos=frozenset((cluster, a, q) for a in accounts for q in qos),
        )
        self.users[name] = user
        return user

    def set_account(self, name: str, fairshare: int | None = 1, grp_tres: str = "", parent: str = "root") -> None:
        """set_account creates or changes an account's Fairshare and GrpTRES."""
        self.accounts[name] = AccountShares(
            cluster=self.config.cluster_name,
            account=name,
            parent=parent,
            fairshare=fairshare,
            gpu_limits=gpu_limits(grp_tres),
            grp_tres=grp_tres,
        )

    def fail_next_submits(self, *faults: str) -> None:
        """fail_next_submits queues faults for the next submit calls, in order."""
        self.submit_faults.extend(faults)

    def jobs_for(self, attempt_id: str, site: str | None = None) -> list[FakeJob]:
        """jobs_for lists the jobs tagged for an attempt (ideally exactly one), of one site when ``site`` is given."""
        with self._lock:
            return [job for job in self.jobs.values()
                    if job.key == f"ms-{attempt_id}" and (site is None or job.site == site)]  # fmt: skip

    def jobs_of_site(self, site: str | None) -> list[FakeJob]:
        """jobs_of_site lists the jobs whose tag names ``site`` (None: jobs with a tag older than sites)."""
        with self._lock:
            return [job for job in self.jobs.values() if job.site == site and parse_tag(job.name, job.comment)]

    def job_of(self, attempt_id: str, site: str | None = None) -> FakeJob:
        """job_of is the one job of an attempt (of one site when ``site`` is given)."""
        found = self.jobs_for(attempt_id, site)
        assert len(found) == 1, f"attempt {attempt_id} has {len(found)} Slurm jobs"
        return found[0]

    def start(self, job_id: int) -> None:
        """start moves a pending job to RUNNING."""
        job = self.jobs[job_id]
        job.state, job.started_at = "RUNNING", _now()

    def finish(self, job_id: int, state: str = "COMPLETED", exit_code: int = 0, signal: int | None = None) -> None:
        """finish ends a job with a Slurm state and exit code."""
        self._end(self.jobs[job_id], state, exit_code, signal)

    def advance(self) -> None:
        """advance moves every job one step: PENDING → RUNNING → (after run_ticks) its outcome."""
        with self._lock:
            for job in list(self.jobs.values()):
                if job.state == "PENDING":
                    self.start(job.job_id)
                elif job.state == "RUNNING":
                    job.ticks += 1
                    if job.ticks >= self.run_ticks:
                        state, code = self.outcome(job)
                        self._end(job, state, code)

    def set_node(self, name: str, state: str = "IDLE", flags: Sequence[str] = ()) -> None:
        """set_node changes a node's state (e.g. ``set_node("node2", "IDLE", ["DRAIN"])``)."""
        self.nodes[name] = replace(self.nodes[name], state=state, condition=node_condition(state, flags))

    def add_job(
        self,
        name: str,
        comment: str = "",
        state: str = "RUNNING",
        nodes: tuple[str, ...] = ("node1",),
        uid: int | None = None,
    ) -> FakeJob:
        """add_job puts a job into Slurm as if submitted by hand, as ``uid`` (default: this process's user)."""
        script = f"#!/bin/bash\n#SBATCH --job-name={name}\n"
        if comment:
            script += f"#SBATCH --comment={comment}\n"
        if nodes:
            script += f"#SBATCH --nodelist={hostlist.compress(nodes)}\n"
        job = self._record(script, uid)
        job.state = state
        if state == "RUNNING":
            job.started_at = _now()
        return job

    def active_jobs(self) -> list[FakeJob]:
        """active_jobs are the jobs that still hold or wait for nodes."""
        with self._lock:
            return [job for job in self.jobs.values() if job.active]

    # --- internals --------------------------------------------------------------------------

    @staticmethod
    def _reservation(spec: ReservationSpec, start: datetime) -> SlurmReservation:
        end = start + timedelta(seconds=spec.duration_s)
        return SlurmReservation(
            name=spec.name,
            nodes=tuple(spec.nodes),
            start=start,
            end=end,
            duration=str(max(1, -(-spec.duration_s // 60))),
            flags=frozenset(spec.flags),
            users=tuple(spec.users),
            accounts=(),
            state="ACTIVE" if start <= _now() else "INACTIVE",
        )

    def _record(self, script: str, uid: int | None = None) -> FakeJob:
        with self._lock:
            return self._add(script, uid)

    def _add(self, script: str, uid: int | None = None) -> FakeJob:
        name, comment, account, components = parse_script(script)
        job_id = self._next_id
        self._next_id += len(components)  # het components take consecutive ids
        job = FakeJob(job_id, name, comment, script, account, components, _now())
        if uid is not None:
            job.uid = uid
        self.jobs[job_id] = job
        return job

    def _end(self, job: FakeJob, state: str, exit_code: int, signal: int | None = None) -> None:
        job.state, job.exit_code, job.signal, job.ended_at = state, exit_code, signal, _now()

    def _squeue_records(self, job: FakeJob) -> list[SqueueJob]:
        """_squeue_records are the job's squeue rows, built again only when something they show changed.

        A benchmark's 10,000 running jobs would otherwise cost the fake more than the daemon
        spends reading them; the rows are immutable, so handing out the same ones is safe.
        """
        key = (job.name, job.comment, job.state, job.account, tuple(job.components), job.exit_code, job.signal,
               job.submitted_at, job.started_at, job.ended_at, job.uid)  # fmt: skip
        cached = self._listed.get(job.job_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        records = self._build_squeue_records(job)
        self._listed[job.job_id] = (key, records)
        return records

    def _build_squeue_records(self, job: FakeJob) -> list[SqueueJob]:
        het = len(job.components) > 1
        records = []
        for offset, nodes in enumerate(job.components):
            running = job.state != "PENDING"
            records.append(
                SqueueJob(
                    job_id=job.job_id + offset,
                    name=job.name,
                    comment=job.comment,
                    state=job.state,
                    account=job.account,
                    qos="normal",
                    partition="gpu",
                    nodelist=_nodelist(nodes) if running and nodes else "",
                    nodes=nodes if running else (),
                    tres_alloc=Tres(),
                    tres_per_node=(),
                    gres_detail=(),
                    raw_exit_status=None,
                    exit_code=job.exit_code,
                    signal=job.signal,
                    het_job_id=job.job_id if het else None,
                    het_job_offset=offset if het else None,
                    array_job_id=None,
                    array_task_id=None,
                    reservation=None,
                    state_reason="None",
                    restart_count=0,
                    submit_time=job.submitted_at,
                    start_time=job.started_at,
                    end_time=job.ended_at,
                    user_name=_user_name(job.uid),
                    user_id=job.uid,
                )
            )
        return records

    def _sacct_records(self, job: FakeJob) -> list[SacctJob]:
        het = len(job.components) > 1
        records = []
        for offset, nodes in enumerate(job.components):
            job_id = f"{job.job_id}+{offset}" if het else str(job.job_id)
            records.append(self._sacct(job, job_id, offset if het else None, None, nodes))
        if job.state != "PENDING":
            records.append(self._sacct(job, f"{job.job_id}.batch", None, "batch", job.components[0]))
        return records

    @staticmethod
    def _sacct(job: FakeJob, job_id: str, het: int | None, step: str | None, nodes: tuple[str, ...]) -> SacctJob:
        return SacctJob(
            job_id=job_id,
            base_job_id=job.job_id,
            het_offset=het,
            array_task_id=None,
            step=step,
            name=job.name if step is None else step,
            comment=job.comment if step is None else "",
            state=job.state,
            state_by_uid=job.cancelled_by if job.state == "CANCELLED" else None,
            exit_code=job.exit_code if job.exit_code is not None else 0,
            signal=job.signal if job.signal is not None else 0,
            reservation=None,
            alloc_tres=Tres(),
            nodes=nodes,
            account=job.account,
            start=job.started_at,
            end=job.ended_at,
            uid=job.uid,
        )


@lru_cache(maxsize=65536)
def _nodelist(nodes: tuple[str, ...]) -> str:
    """_nodelist is squeue's NODELIST of a job's nodes, rendered once: the fake's own cost is no daemon's."""
    return hostlist.compress(nodes)


_NAMES: dict[int, str] = {}  # uids found in the password database: a listing of 10,000 jobs asks once


def _user_name(uid: int) -> str:
    """_user_name is the login name of ``uid`` as squeue shows it (the uid itself when it has none)."""
    name = _NAMES.get(uid)
    if name is not None:
        return name
    try:
        name = _NAMES[uid] = pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)  # not remembered: a test may create the user later
    return name


def observed_state(job: FakeJob) -> str:
    """observed_state is the metasched outcome the job maps to (handy in assertions)."""
    return map_state(job.state, job.exit_code, job.signal).outcome.value

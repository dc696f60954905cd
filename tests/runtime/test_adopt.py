"""Adoption of held plain sbatch jobs (meta/cycle/adopt/adopter.py) against a scripted Slurm, on SQLite and PostgreSQL.

The Slurm side is what job_submit.lua leaves (a real ``scontrol -o show job`` line of a held
job, shortened to the fields read, and the same job in ``squeue --json``); the real cluster is
exercised by tests/integration/test_adoption.py and tests/security/test_s3_adoption.py.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from sqlalchemy import func, select

from meta.cycle.adopt.adopter import Adopter
from meta.model.spec import TrainingSpec
from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from meta.store import audit
from meta.store.db import Database
from meta.store.lifecycle import cancel_job
from meta.store.models import AdoptedJob, Job, Task
from slurm_bridge import tags
from slurm_bridge.adoption import held_job
from slurm_bridge.parse.scontrol import parse_show_job
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.parse.tres import Tres
from slurm_bridge.parse.values import local_time
from tests.runtime.support import attempt, lead, place

SUBMITTED = "2026-12-03T17:10:21"
# a held job as Slurm 22.05 shows it after job_submit.lua (fields metasched does not read left out)
HELD = (
    "JobId=2894 JobName=plain-b UserId=bob(2002) GroupId=bob(2002) MCS_label=N/A Priority=0 Nice=0 "
    "Account=tenant-b QOS=normal JobState=PENDING Reason=JobHeldUser Dependency=(null) Requeue=1 Restarts=0 "
    f"BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=00:02:00 TimeMin=N/A SubmitTime={SUBMITTED} "
    "Partition=managed AllocNode:Sid=host:1 ReqNodeList=(null) ExcNodeList=t4n9 NodeList=(null) NumNodes=2-2 "
    "NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,mem=4000M,node=2,billing=2,gres/gpu=8,"
    "gres/gpu:t4=8 Socks/Node=* MinCPUsNode=1 MinMemoryCPU=2000M Features=(null) Command=(null) WorkDir=/tmp "
    "AdminComment=metasched:adopt Comment=metasched: waiting for metasched's policy StdOut=/dev/null "
    "TresPerNode=gres:gpu:t4:4"
)
# the same job in ``squeue --json`` (openapi v0.0.38), the fields adoption reads
HELD_JSON = {
    "job_id": 2894, "name": "plain-b", "user_name": "bob", "user_id": 2002, "group_id": 2002,
    "account": "tenant-b", "qos": "normal", "partition": "managed", "time_limit": 2, "node_count": 2,
    "tres_req_str": "cpu=2,mem=4000M,node=2,billing=2,gres/gpu=8,gres/gpu:t4=8",
    "current_working_directory": "/tmp", "submit_time": int(local_time(SUBMITTED).timestamp()),
    "required_nodes": "", "excluded_nodes": "t4n9", "admin_comment": "metasched:adopt",
}  # fmt: skip


def squeue_job(job_id: int = 2894, state: str = "PENDING", reason: str = "JobHeldUser", priority: int = 0,
               partition: str = "managed") -> SqueueJob:  # fmt: skip
    """squeue_job is the job as the daemon's squeue read shows it."""
    return SqueueJob(
        job_id=job_id, name="plain-b", comment="", state=state, account="tenant-b", qos="normal",
        partition=partition, nodelist="", nodes=(), tres_alloc=Tres(), tres_per_node=(), gres_detail=(),
        raw_exit_status=None, exit_code=None, signal=None, het_job_id=None, het_job_offset=None,
        array_job_id=None, array_task_id=None, reservation=None, state_reason=reason, restart_count=0,
        submit_time=local_time(SUBMITTED), start_time=None, end_time=None, user_name="bob", priority=priority,
    )  # fmt: skip


@dataclasses.dataclass
class ScriptedSlurm:
    """ScriptedSlurm answers squeue and scontrol show job from lists and records what is sent."""

    queue: list[SqueueJob]
    records: str = HELD
    entries: list[dict] = dataclasses.field(default_factory=lambda: [dict(HELD_JSON)])
    comments: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    released: list[tuple[str, tuple[str, ...], str]] = dataclasses.field(default_factory=list)
    cancelled: list[str] = dataclasses.field(default_factory=list)
    show_calls: int = 0

    def squeue(self) -> list[SqueueJob]:
        return list(self.queue)

    def squeue_json(self) -> list[dict]:
        return [dict(entry) for entry in self.entries]

    def show_jobs(self):  # noqa: ANN201 - ScontrolJob list
        self.show_calls += 1
        return parse_show_job(self.records)

    def set_comment(self, job_id: int | str, comment: str) -> None:
        self.comments.append((str(job_id), comment))

    def release_held(self, job_id: int | str, nodes, comment: str) -> None:  # noqa: ANN001
        self.released.append((str(job_id), tuple(nodes), comment))

    def cancel(self, job_ids, signal=None) -> None:  # noqa: ANN001
        self.cancelled.extend(str(j) for j in job_ids)


def adopted_jobs(db: Database) -> list[Job]:
    with db.session() as session:
        return list(session.scalars(select(Job).join(AdoptedJob, AdoptedJob.job_id == Job.id)))


def test_held_job_is_read_per_node() -> None:
    job = held_job(HELD_JSON)
    assert (job.job_id, job.user, job.uid, job.gid, job.account, job.partition) == (2894, "bob", 2002, 2002, "tenant-b", "managed")
    assert (job.nodes, job.cpus_per_node, job.memory_mib_per_node, job.gpus_per_node, job.gpu_type) == (2, 1, 2000, 4, "t4")
    assert (job.time_limit_s, job.work_dir, job.excluded_nodes, job.marked) == (120, "/tmp", ("t4n9",), True)
    assert job.submitted_at == datetime.fromisoformat(SUBMITTED).astimezone()


def test_a_held_job_is_adopted_once_by_any_replica(database: Database) -> None:
    slurm = ScriptedSlurm([squeue_job(), squeue_job(7, reason="JobHeldUser", partition="gpu")])
    leadership = lead(database)
    first = Adopter(database, slurm, ("managed",)).run(leadership)
    # a restarted daemon or a new leader: a new Adopter with nothing in memory
    again = Adopter(database, slurm, ("managed",)).run(leadership)
    assert (first.adopted, again.adopted) == (["2894"], [])
    assert slurm.show_calls == 1  # an adopted job is not read again
    (job,) = adopted_jobs(database)
    assert (job.owner_uid, job.owner_gid, job.submitted_by, job.tenant, job.submit_dir) == (2002, 2002, "bob", "tenant-b", "/tmp")
    spec = Service(database).status(job.short_id)
    assert spec.state == JobState.PENDING
    with database.session() as session:
        stored = session.get(AdoptedJob, job.id)
        assert stored is not None and stored.slurm_job_id == "2894"
        assert stored.slurm_submitted_at == datetime.fromisoformat(SUBMITTED).astimezone().astimezone(UTC)
        from meta.store.lifecycle import job_spec  # noqa: PLC0415

        loaded = job_spec(session, job.id)
        assert [e.action for e in audit.read(session)] == ["job.adopt"]
    assert isinstance(loaded, TrainingSpec)
    assert (loaded.workers, loaded.resources.gpus, loaded.resources.gpu_type, loaded.partition) == (2, 4, "t4", "managed")
    assert (loaded.time_limit_s, loaded.retry.max_attempts, loaded.is_preemptible()) == (120.0, 1, False)
    assert loaded.sbatch is not None and loaded.sbatch.exclude == ("t4n9",)
    assert slurm.comments[0] == ("2894", f"metasched job {job.short_id} waits: waiting for its first scheduling "
                                         f"cycle (metasched explain {job.short_id})")  # fmt: skip


def test_a_job_held_by_someone_else_is_left_alone(database: Database) -> None:
    slurm = ScriptedSlurm([squeue_job()], records=HELD.replace("AdminComment=metasched:adopt ", ""),
                          entries=[{**HELD_JSON, "admin_comment": ""}])  # fmt: skip
    adopter = Adopter(database, slurm, ("managed",))
    assert adopter.run(lead(database)).adopted == [] and adopter.run(lead(database)).adopted == []
    assert adopted_jobs(database) == [] and slurm.comments == []
    assert slurm.show_calls == 1  # not read again next period
    assert Adopter(database, slurm, ()).run(lead(database)).adopted == []  # no managed partitions: no reads


def test_scancel_of_a_waiting_adopted_job_cancels_it_and_a_metasched_cancel_scancels(database: Database) -> None:
    slurm = ScriptedSlurm([squeue_job()])
    leadership = lead(database)
    adopter = Adopter(database, slurm, ("managed",))
    adopter.run(leadership)
    (job,) = adopted_jobs(database)
    slurm.queue = [squeue_job(state="CANCELLED", reason="None")]
    assert adopter.run(leadership).cancelled == [job.id]
    assert Service(database).status(job.short_id).state == JobState.CANCELLED
    assert adopter.run(leadership).cancelled == [] and slurm.cancelled == []  # once; nothing left to scancel

    other = ScriptedSlurm([squeue_job(3001)], records=HELD.replace("JobId=2894", "JobId=3001"),
                          entries=[{**HELD_JSON, "job_id": 3001}])  # fmt: skip
    adopter = Adopter(database, other, ("managed",))
    adopter.run(leadership)
    (second,) = [j for j in adopted_jobs(database) if j.id != job.id]
    with database.session() as session:
        cancel_job(session, session.get(Job, second.id), "bob")
    assert adopter.run(leadership).scancelled == ["3001"] and other.cancelled == ["3001"]


def test_a_placed_adopted_job_is_released_onto_its_nodes_not_sbatched(database: Database) -> None:
    slurm = ScriptedSlurm([squeue_job()])
    leadership = lead(database)
    adopter = Adopter(database, slurm, ("managed",))
    adopter.run(leadership)
    (job,) = adopted_jobs(database)
    with database.session() as session:
        (task_id,) = session.scalars(select(Task.id).where(Task.job_id == job.id))
    shares = [{"node": n, "gpus": 4, "gpu_type": "t4", "cpus": 1, "memory_mib": 2000} for n in ("t4n2", "t4n1")]
    attempt_id = place(database, task_id, shares)
    assert adopter.release_created(leadership).released == ["2894"]
    row = attempt(database, attempt_id)
    assert (row.state, row.slurm_job_id) == (AttemptState.LAUNCHING.value, "2894")
    assert slurm.released == [("2894", ("t4n2", "t4n1"), f"metasched:site={adopter.site}:attempt={attempt_id}")]
    # the release did not take (squeue still shows it held): sent again next period, never sbatch
    assert adopter.run(leadership).released == ["2894"]
    slurm.queue = [squeue_job(state="RUNNING", reason="None", priority=5)]
    assert adopter.run(leadership).released == []
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(AdoptedJob)) == 1


def test_a_job_whose_sources_disagree_is_refused_audited_and_not_read_again(database: Database) -> None:
    # bob's script path poses as alice's fields in scontrol's line (finding S3 of issue 22)
    forged = HELD.replace("Command=(null)", "Command=/tmp/x UserId=alice(2001) Account=tenant-a TRES=cpu=1/run.sh")
    slurm = ScriptedSlurm([squeue_job()], records=forged)
    adopter = Adopter(database, slurm, ("managed",))
    assert adopter.run(lead(database)).refused == ["2894"]
    assert adopter.run(lead(database)).refused == [] and slurm.show_calls == 1  # refused once per replica
    assert adopted_jobs(database) == []
    with database.session() as session:
        (row,) = audit.read(session)
    assert (row.action, row.subject, row.tenant, row.detail["user"], row.detail["uid"]) == (
        "job.adopt.refused", "2894", "tenant-b", "bob", 2002)  # fmt: skip
    assert "scontrol repeats Account, TRES, UserId (text posing as fields)" in row.detail["reason"]
    assert "alice" not in row.detail["reason"]  # the user's text stays out of the audit and the comment
    assert slurm.comments[0][1].startswith("metasched cannot adopt this job: its Slurm fields disagree")


def test_a_held_job_another_site_is_releasing_is_not_adopted(database: Database) -> None:
    # between another site's ``scontrol update Comment=<its tag>`` and its release, the job is still held here
    theirs = dataclasses.replace(squeue_job(), comment=tags.comment("othersite1", "a-of-theirs"))
    slurm = ScriptedSlurm([theirs])
    adopter = Adopter(database, slurm, ("managed",), site="thissite1")
    result = adopter.run(lead(database))
    assert result.adopted == [] and result.refused == [] and adopted_jobs(database) == []
    assert slurm.show_calls == 0 and slurm.comments == []  # not even read, nor its comment touched
    slurm.queue = [dataclasses.replace(squeue_job(), comment=tags.comment("thissite1", "a-of-ours"))]
    assert adopter.run(lead(database)).adopted == ["2894"]  # only another site's tag keeps it from adoption

"""msqueue and mscancel through the API: squeue's columns, options and refusals, scancel's messages and codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import event

from cli.sbatch.mscancel import main as mscancel
from cli.sbatch.msqueue import main as msqueue
from cli.sbatch.squeue_format import FormatError, duration, parse_format, render_line
from meta.model.durations import utcnow
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.service.operations import Operations
from meta.store.models import Task, TaskReason
from tenants.identity import member
from tests.api_support import RunningApi
from tests.runtime.support import place, share, training

ALICE, BOB, CAROL = 1001, 1002, 1003
USERS = {ALICE: ("alice", "tenant-a"), BOB: ("bob", "tenant-b"), CAROL: ("carol", "tenant-a")}
HEADER = ["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"]

Run = Callable[..., Result]


@pytest.fixture
def run(api: RunningApi, tmp_path: Path) -> Run:
    """run invokes msqueue (or mscancel) as ``uid`` through the API; no traceback, ever."""

    def invoke(*args: str, uid: int = ALICE, prog: Any = msqueue) -> Result:
        cred = tmp_path / f"cred-{uid}"
        cred.write_text(f"uid={uid}\n")
        env = {"METASCHED_API": api.address, "METASCHED_CREDENTIAL_FILE": str(cred), "METASCHED_DB": None,
               "METASCHED_DB_FILE": None}  # fmt: skip
        name = {msqueue: "msqueue", mscancel: "mscancel"}.get(prog, "metasched")
        result = CliRunner().invoke(prog, list(args), env=env, prog_name=name)
        assert "Traceback" not in result.output, result.output
        if result.exception is not None:
            assert isinstance(result.exception, SystemExit), repr(result.exception)
        return result

    return invoke


def _job(service: Service, uid: int, name: str, **fields: Any) -> tuple[str, list[str]]:
    """_job submits a training job as user ``uid``; its short id and task ids."""
    user, tenant = USERS[uid]
    spec = training(name, tenant=tenant, time_limit="2h", **fields)
    job = service.submit(spec, principal=member(user, uid, [tenant])).job
    return job.short_id, _tasks(service, job.id)


def _tasks(service: Service, job_id: str) -> list[str]:
    with service.db.session() as session:
        return [t.id for t in session.query(Task).filter(Task.job_id == job_id).order_by(Task.index)]


def _running(service: Service, task_id: str, slurm_id: str, nodes: tuple[str, ...], minutes: int = 3) -> None:
    """_running makes the task's attempt run in Slurm on ``nodes`` since ``minutes`` ago."""
    place(service.db, task_id, [share(n) for n in nodes], AttemptState.RUNNING, slurm_job_id=slurm_id,
          values={"started_at": utcnow() - timedelta(minutes=minutes, seconds=5)})  # fmt: skip


def _waiting(service: Service, job: str, task_id: str, code: str) -> None:
    with service.db.session() as session:
        job_id = session.get(Task, task_id).job_id
        session.add(TaskReason(task_id=task_id, job_id=job_id, cycle=1, code=code, message="m", at=utcnow()))


def lines(result: Result) -> list[list[str]]:
    assert result.exit_code == 0, result.output
    return [line.split() for line in result.stdout.splitlines()]


# --- formats --------------------------------------------------------------------------------


def test_durations_and_formats_are_squeues() -> None:
    assert [duration(s) for s in (0, 65, 3600, 3 * 3600 + 61, 2 * 86400 + 5)] == [
        "0:00", "1:05", "1:00:00", "3:01:01", "2-00:00:05"]  # fmt: skip
    row = {"job_id": "j1", "name": "a-very-long-name", "user": "alice", "st": "R", "nodelist": ["n2", "n1"],
           "reason": "None", "partition": "gpu", "run_time_s": 61, "nodes": 2}  # fmt: skip
    parts = parse_format("%.5i|%.8j|%3u|%R|%N|100%%")
    assert render_line(parts, row) == "   j1|a-very-l|ali|n[1-2]|n[1-2]|100%"
    assert render_line(parse_format("%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"), None).split() == HEADER
    with pytest.raises(FormatError, match="Invalid job format specification: %Z"):
        parse_format("%i %Z")


# --- msqueue --------------------------------------------------------------------------------


def test_msqueue_shows_waiting_and_running_jobs_with_squeue_columns(service: Service, run: Run) -> None:
    waiting, (wait_task,) = _job(service, ALICE, "prep", partition="debug")
    running, (run_task,) = _job(service, ALICE, "train", workers=2)
    bobs, _ = _job(service, BOB, "bobs")
    _waiting(service, waiting, wait_task, "WaitingForQuota")
    _running(service, run_task, "4242", ("node2", "node1"))
    rows = lines(run())
    assert rows[0] == HEADER
    by_id = {row[0]: row for row in rows[1:]}
    assert set(by_id) == {waiting, running}  # bob's job is another tenant's: not shown to alice
    assert by_id[waiting] == [waiting, "debug", "prep", "alice", "PD", "0:00", "1", "(WaitingForQuota)"]
    job, _, name, user, st, time, nodes, nodelist = by_id[running]
    assert (name, user, st, nodes, nodelist) == ("train", "alice", "R", "2", "node[1-2]")
    assert time in ("3:05", "3:06")
    assert [r[0] for r in lines(run(uid=BOB))[1:]] == [bobs]


def test_msqueue_options_select_and_format(service: Service, run: Run) -> None:
    first, (task_1,) = _job(service, ALICE, "one", partition="debug")
    second, (task_2,) = _job(service, ALICE, "two")
    carols, _ = _job(service, CAROL, "three")
    _running(service, task_2, "77", ("node1",))
    ids = lambda result: [r[0] for r in lines(result)]  # noqa: E731
    assert ids(run("-h", "-t", "R")) == [second]
    assert ids(run("-h", "-t", "PENDING,R")) == [first, second, carols]
    assert ids(run("-h", "-u", "carol")) == [carols] == ids(run("-h", "--me", uid=CAROL))
    assert ids(run("-h", "-j", f"{first},{carols}")) == [first, carols]
    assert ids(run("-h", "-p", "debug")) == [first]
    assert ids(run("-h", "-A", "tenant-b")) == []
    assert ids(run("-h", "-n", "two")) == [second]
    out = run("-h", "-j", second, "-o", "%i|%T|%t|%l|%a|%D|%N|%j")
    assert out.stdout.strip() == f"{second}|RUNNING|R|2:00:00|tenant-a|1|node1|two"
    [row] = json.loads(run("--json", "-j", second).stdout)
    assert (row["job_id"], row["slurm_job_ids"], row["time_limit_s"], row["st"]) == (second, ["77"], 7200, "R")


@pytest.mark.parametrize(
    ("args", "message"),
    [(["-t", "XX"], "msqueue: error: Invalid job state specified: XX"),
     (["-o", "%i %Q"], "msqueue: error: Invalid job format specification: %Q")],
)  # fmt: skip
def test_msqueue_refuses_as_squeue(run: Run, args: list[str], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 1 and result.stderr.startswith(message) and result.stdout == ""


def test_a_queue_page_costs_the_same_queries_however_many_jobs(service: Service) -> None:
    def statements(jobs: int) -> int:
        for i in range(jobs):
            _, (task_id,) = _job(service, ALICE, f"n{i}")
            if i % 2:
                _running(service, task_id, str(1000 + i), ("node1",))
        count = 0

        def seen(*_: Any) -> None:
            nonlocal count
            count += 1

        event.listen(service.db.engine, "before_cursor_execute", seen)
        try:
            rows = Operations(service, member("alice", ALICE, ["tenant-a"])).queue()
        finally:
            event.remove(service.db.engine, "before_cursor_execute", seen)
        assert len(rows) >= jobs
        return count

    assert statements(3) == statements(40) <= 6


def test_metasched_list_has_time_limit_nodes_slurm_id_and_reason(service: Service, run: Run) -> None:
    from cli.main import cli

    waiting, (wait_task,) = _job(service, ALICE, "prep")
    running, (run_task,) = _job(service, ALICE, "train", workers=2)
    _waiting(service, waiting, wait_task, "LowerFairShare")
    _running(service, run_task, "4242", ("node2", "node1"))
    rows = {row[0]: row for row in lines(run("list", prog=cli))[1:]}
    assert rows[waiting][6:11] == ["pending", "2:00:00", "1", "-", "LowerFairShare"]  # TASKS is "1 pending"
    assert rows[running][6:11] == ["running", "2:00:00", "2", "4242", "-"]
    [listed] = [j for j in json.loads(run("list", "--json", prog=cli).stdout) if j["short_id"] == running]
    assert (listed["slurm_job_ids"], listed["nodes"], listed["time_limit_s"]) == (["4242"], 2, 7200)


# --- mscancel -------------------------------------------------------------------------------


def _state(service: Service, short_id: str) -> str:
    return service.status(short_id).state.value


def test_mscancel_by_id_name_user_and_state(service: Service, run: Run) -> None:
    one, _ = _job(service, ALICE, "one")
    two, _ = _job(service, ALICE, "two")
    three, (task_3,) = _job(service, ALICE, "three")
    four, _ = _job(service, ALICE, "four")
    _running(service, task_3, "99", ("node1",))
    assert run(one, prog=mscancel).exit_code == 0
    assert _state(service, one) == "cancelled"
    assert run("-n", "two", prog=mscancel).exit_code == 0
    assert _state(service, two) == "cancelled" and _state(service, four) == "pending"
    assert run("99", prog=mscancel).exit_code == 0  # the Slurm id of its running attempt
    assert _state(service, three) == "cancelling"
    assert run("-u", "alice", "-t", "PENDING", prog=mscancel).exit_code == 0
    assert _state(service, four) == "cancelled"
    assert run(one, prog=mscancel).exit_code == 0  # already ended: no error, as scancel


def test_mscancel_errors_are_scancels(service: Service, run: Run) -> None:
    alices, _ = _job(service, ALICE, "mine")
    result = run("jnosuchjob", alices, uid=BOB, prog=mscancel)  # bob cannot see alice's job: invalid to him
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "mscancel: error: Kill job error on job id jnosuchjob: Invalid job id specified",
        f"mscancel: error: Kill job error on job id {alices}: Invalid job id specified",
    ]
    denied = run(alices, uid=CAROL, prog=mscancel)  # carol sees tenant-a's jobs, is not the owner
    assert denied.exit_code == 210
    assert denied.stderr.strip() == f"mscancel: error: Kill job error on job id {alices}: Access/permission denied"
    waiting = run("--signal", "USR1", alices, prog=mscancel)
    assert waiting.exit_code == 228 and "Job can not be altered now, try again later" in waiting.stderr
    assert _state(service, alices) == "pending"
    none = run(prog=mscancel)
    assert none.exit_code == 1 and none.stderr.strip() == "mscancel: error: No job identification provided"
    bad = run("-t", "COMPLETED", "-u", "alice", prog=mscancel)
    assert bad.exit_code == 1 and "Invalid job state specified: COMPLETED" in bad.stderr


def test_mscancel_with_nothing_matching_is_silent(service: Service, run: Run) -> None:
    _job(service, ALICE, "mine")
    result = run("-n", "nosuchname", prog=mscancel)
    assert (result.exit_code, result.output) == (0, "")

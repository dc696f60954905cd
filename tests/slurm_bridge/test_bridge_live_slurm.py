"""Against the real dev cluster (``deploy/devcluster up``): submit, observe, cancel, reserve.

Skipped without a cluster; with METASCHED_REQUIRE_SLURM=1 they fail instead (see conftest).
Polling waits for Slurm to get there; nothing asserts on how long it took.
"""

import functools
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest

from meta.model.kinds import JobKind
from meta.model.resources import ResourceVector
from slurm_bridge.attempt_outcome import combined
from slurm_bridge.call_records import RecordingObserver
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.errors import SlurmRejected, SlurmTransient, SlurmUnknownOutcome
from slurm_bridge.faults import FaultInjectingClient, FaultKind
from slurm_bridge.inventory import build_inventory
from slurm_bridge.launch import LaunchRequest, Role
from slurm_bridge.render import render
from slurm_bridge.reservations import ActionKind, ReservationSpec, apply_reservations
from slurm_bridge.runner import CommandRunner
from slurm_bridge.states import FailureCategory, Outcome

# the dev cluster is shared: hold the lock daemon tests hold, so no reconciler cancels our jobs
pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_exclusive")]
T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], what: str, limit_s: float = 120.0) -> T:
    """wait_for polls ``probe`` until it returns something truthy."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        result = probe()
        if result:
            return result
        time.sleep(0.5)
    # The dev cluster is shared: say what the queue looked like, e.g. a job someone else cancelled.
    mine = [(j.job_id, j.name, j.state, j.state_reason) for j in CliSlurmClient().squeue() if j.tag]
    raise AssertionError(f"gave up waiting for {what}; metasched-tagged jobs now: {mine}")


SITE = "bridge-live-test"


@pytest.fixture
def client():
    return CliSlurmClient()


def launch(tmp_path, command: str | None, **changes) -> LaunchRequest:
    fields = dict(
        attempt_id=f"test-{uuid.uuid4()}",
        attempt_number=1,
        fencing_token=5,
        job_id="live-job",
        task_id="live-task",
        tenant="tenant-a",
        kind=JobKind.EVALUATION,
        time_limit_s=300,
        # a site no daemon is: the daemons other suites run on this cluster leave these jobs alone
        site=SITE,
        command=command,
        per_node=ResourceVector(cpus=1, memory="1G", gpus=1, gpu_type="t4"),
        output_dir=str(tmp_path),
        job_name="live; rm -rf /",
    )
    fields.update(changes)
    return LaunchRequest(**fields)


def quiet_nodes(client: CliSlurmClient, count: int) -> tuple[str, ...]:
    """quiet_nodes picks ``count`` idle nodes of one GPU type that no reservation covers.

    Other engineers share the dev cluster (captures leave reservations behind), so the tests
    choose their nodes instead of hard-coding them.
    """
    soon = datetime.now(UTC) + timedelta(minutes=10)  # our jobs end long before a later reservation
    reserved = {
        node
        for r in client.reservations()
        if r.state == "ACTIVE" or (r.start and r.start < soon)
        for node in r.nodes
    }
    groups: dict[str, list[str]] = {}
    for node in sorted(client.sinfo(), key=lambda n: n.name):
        used = sum(g.count for g in node.gres_used)
        if node.schedulable and not used and node.name not in reserved and node.gres:
            groups.setdefault(node.gres[0].type or "", []).append(node.name)
    for names in groups.values():
        if len(names) >= count:
            return tuple(names[:count])
    pytest.skip(f"no {count} idle, unreserved nodes of one GPU type on the shared dev cluster right now")


def gpus_of(client: CliSlurmClient, node: str) -> ResourceVector:
    """gpus_of is a node's whole GPU complement as a per-node request."""
    (state,) = [n for n in build_inventory(client.sinfo()).nodes if n.name == node]
    return ResourceVector(cpus=1, memory="1G", gpus=state.capacity.gpus, gpu_type=state.capacity.gpu_type)


class CancelledElsewhere(Exception):
    """CancelledElsewhere: another process on the shared cluster cancelled our job (e.g. an orphan sweep)."""


def find(client: CliSlurmClient, attempt_id: str, *, expect_cancel: bool = False):
    """find looks an attempt up in squeue by its tag, the way the reconciler does."""
    jobs = [job for job in client.squeue() if job.tag and job.tag.attempt_id == attempt_id]
    if not expect_cancel and any(job.observed.outcome == Outcome.CANCELLED for job in jobs):
        raise CancelledElsewhere(f"attempt {attempt_id} was cancelled by someone else: {jobs}")
    return jobs


def retried(test: Callable[..., None]) -> Callable[..., None]:
    """retried reruns a live test whose job another process cancelled, then skips saying so.

    Other suites run daemons against the same dev cluster, and their reconcilers cancel jobs
    tagged with their own site that have no attempt in their store; these jobs name a site of
    their own (``SITE``), so this is for an older daemon, or a test that cancels by hand.
    """

    @functools.wraps(test)
    def run(*args, **kwargs) -> None:
        for _ in range(3):
            try:
                return test(*args, **kwargs)
            except CancelledElsewhere:
                continue
        pytest.skip("our job was cancelled by another process on the shared dev cluster three times")

    return run


def sacct_record(client: CliSlurmClient, job_id: int):
    since = datetime.now(UTC) - timedelta(minutes=30)
    return next((r for r in client.sacct(since) if r.base_job_id == job_id and r.observed.terminal), None)


@retried
def test_failing_job_is_seen_as_user_error(client, tmp_path):
    request = launch(tmp_path, 'echo "attempt=$METASCHED_ATTEMPT_ID name=$METASCHED_JOB_NAME"; exit 3')
    job_id = client.submit(render(request))
    (job,) = wait_for(lambda: [j for j in find(client, request.attempt_id) if j.observed.terminal], "job end")
    assert job.job_id == job_id and job.tag.attempt_id == request.attempt_id and job.tag.fencing_token is None
    assert job.observed.outcome == Outcome.FAILED and job.exit_code == 3
    record = wait_for(lambda: sacct_record(client, job_id), "sacct record")
    assert (record.exit_code, record.observed.category) == (3, FailureCategory.USER_ERROR)
    assert record.tag.attempt_id == request.attempt_id
    output = (tmp_path / f"slurm-{job_id}.out").read_text()
    assert f"attempt={request.attempt_id} name=live; rm -rf /" in output


@retried
def test_running_gang_is_seen_then_cancelled(client, tmp_path):
    nodes = quiet_nodes(client, 2)
    per_node = gpus_of(client, nodes[0]).model_copy(update={"gpus": 2})
    request = launch(
        tmp_path, "sleep 120", kind=JobKind.TRAINING, num_nodes=2, nodes=nodes, per_node=per_node
    )
    job_id = client.submit(render(request))
    try:
        (job,) = wait_for(
            lambda: [j for j in find(client, request.attempt_id) if j.observed.outcome == Outcome.RUNNING],
            "running",
        )
        assert job.nodes == nodes and job.tres_alloc.gpus_by_type == {per_node.gpu_type: 4}
        assert job.account == "tenant-a"
    finally:
        client.cancel([job_id])
    (job,) = wait_for(
        lambda: [j for j in find(client, request.attempt_id, expect_cancel=True) if j.observed.terminal],
        "cancel",
    )
    assert job.observed.outcome == Outcome.CANCELLED
    client.cancel([job_id])  # cancelling again is not an error
    record = wait_for(lambda: sacct_record(client, job_id), "sacct record")
    assert record.observed.category == FailureCategory.CANCELLED


@retried
def test_checkpoint_signal_reaches_every_task_once(client, tmp_path):
    # Each task installs its trap, then says "ready"; the test signals only after both did.
    handler = (
        "n=0; trap 'n=$((n+1)); echo \"USR1 #$n task $SLURM_PROCID\"' USR1; "
        "echo ready; for i in $(seq 240); do sleep 0.5; done"
    )
    nodes = quiet_nodes(client, 2)
    per_node = gpus_of(client, nodes[0]).model_copy(update={"gpus": 1})
    request = launch(tmp_path, handler, kind=JobKind.TRAINING, num_nodes=2, nodes=nodes, per_node=per_node)
    job_id = client.submit(render(request))
    output = tmp_path / f"slurm-{job_id}.out"

    def logged(word: str, count: int) -> list[str] | None:
        find(client, request.attempt_id)  # raises if someone else cancelled the job
        text = output.read_text() if output.exists() else ""
        return (
            sorted(line for line in text.splitlines() if line.startswith(word))
            if text.count(word) >= count
            else None
        )

    try:
        wait_for(lambda: logged("ready", 2), "both traps installed")
        client.cancel([job_id], signal="USR1")
        lines = wait_for(lambda: logged("USR1", 2), "both tasks to log the signal")
        assert lines == ["USR1 #1 task 0", "USR1 #1 task 1"]
    finally:
        client.cancel([job_id])


@retried
def test_preempted_job_is_seen_as_preempted(client, tmp_path):
    # QOS high preempts low on the dev cluster; with --no-requeue the victim ends PREEMPTED.
    (node,) = quiet_nodes(client, 1)
    whole = gpus_of(client, node)
    victim = launch(tmp_path, "sleep 120", nodes=(node,), per_node=whole, qos="low")
    victim_id = client.submit(render(victim))
    wait_for(
        lambda: [j for j in find(client, victim.attempt_id) if j.observed.outcome == Outcome.RUNNING],
        "victim",
    )
    winner = launch(tmp_path, "true", nodes=(node,), per_node=whole, qos="high")
    winner_id = client.submit(render(winner))
    try:
        (job,) = wait_for(
            lambda: [j for j in find(client, victim.attempt_id) if j.observed.terminal], "preemption"
        )
        assert job.observed.outcome == Outcome.PREEMPTED
        assert job.observed.category == FailureCategory.PREEMPTED
        record = wait_for(lambda: sacct_record(client, victim_id), "sacct record")
        assert record.observed.outcome == Outcome.PREEMPTED
    finally:
        client.cancel([victim_id, winner_id])


@retried
def test_het_job_roles_run_as_components(client, tmp_path):
    roles = (
        Role("trainer", ResourceVector(cpus=1, memory="1G", gpus=1), 'echo "role=$METASCHED_ROLE"'),
        Role("evaluator", ResourceVector(cpus=1, memory="1G"), 'echo "role=$METASCHED_ROLE"'),
    )
    request = launch(tmp_path, None, kind=JobKind.TRAINING, per_node=ResourceVector(), roles=roles)
    job_id = client.submit(render(request))

    def both_ended():
        jobs = find(client, request.attempt_id)
        return jobs if len(jobs) == 2 and all(j.observed.terminal for j in jobs) else None

    components = wait_for(both_ended, "both het components to end")
    assert {j.het_job_id for j in components} == {job_id}
    assert sorted(j.het_job_offset for j in components) == [0, 1]
    assert combined([j.observed for j in components]).outcome == Outcome.SUCCEEDED
    output = (tmp_path / f"slurm-{job_id}.out").read_text()
    assert "role=trainer" in output and "role=evaluator" in output


def _reconciler_view(job) -> tuple:
    """_reconciler_view is what the reconciler and the tests read of one squeue job."""
    return (
        job.job_id, job.name, job.comment, job.state, job.exit_code, job.signal, job.nodes, job.het_job_id,
        job.het_job_offset, job.array_job_id, job.array_task_id, job.tres_alloc.cpus, job.tres_alloc.gpus,
        job.account, job.partition, job.start_time, job.end_time, job.tag,
    )


def test_squeue_text_read_agrees_with_squeue_json():
    import json
    import subprocess

    from slurm_bridge.parse.squeue import parse_squeue_json

    base = ["sbatch", "--parsable", "-A", "tenant-a", "-c1", "--mem=100M", "-o", "/dev/null"]
    odd = base + ["-J", "a|b c,d", "--comment", "x|y,z", "--array=1-2", "--wrap", "exit 3"]
    het = base + ["-J", "het", "--wrap", "true", ":", "-c1", "--mem=100M"]
    ids = [int(subprocess.run(argv, check=True, capture_output=True, text=True).stdout.split(";")[0].split("+")[0])
           for argv in (odd, het)]
    client = CliSlurmClient()

    def ended():
        mine = [j for j in client.squeue() if ids[0] in (j.job_id, j.array_job_id) or j.het_job_id == ids[1]]
        return mine if len(mine) == 4 and all(j.observed.terminal for j in mine) else None

    text_jobs = {j.job_id: j for j in wait_for(ended, "the array and het job to end")}
    document = subprocess.run(["squeue", "--json"], check=True, capture_output=True, text=True).stdout
    json_jobs = {j.job_id: j for j in parse_squeue_json(document) if j.job_id in text_jobs}
    assert json_jobs.keys() == text_jobs.keys()
    for job_id, job in text_jobs.items():
        assert _reconciler_view(job) == _reconciler_view(json_jobs[job_id])
    array_tasks = [j for j in text_jobs.values() if j.array_job_id == ids[0]]
    assert sorted(j.array_task_id for j in array_tasks) == [1, 2]
    assert all((j.name, j.comment, j.exit_code) == ("a|b c,d", "x|y,z", 3) for j in array_tasks)
    assert json.loads(document)  # the reference was a real document, not an error stub


def test_unknown_outcome_is_resolved_by_lookup(client, tmp_path):
    faulty = FaultInjectingClient(client)
    faulty.inject("submit", FaultKind.TIMEOUT_AFTER)
    request = launch(tmp_path, "sleep 60")
    with pytest.raises(SlurmUnknownOutcome):
        faulty.submit(render(request))
    (job,) = wait_for(lambda: find(client, request.attempt_id, expect_cancel=True), "the lost submission")
    client.cancel([job.job_id])


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"tenant": "no-such-tenant"}, "account"),
        ({"per_node": ResourceVector(cpus=1, gpus=16, gpu_type="a100")}, "configuration"),
    ],
)
def test_impossible_submissions_are_rejected(client, tmp_path, changes, message):
    with pytest.raises(SlurmRejected, match=message):
        client.submit(render(launch(tmp_path, "true", **changes)))
    assert client.runner.counter.calls("sbatch") == 1


def test_inventory_from_live_sinfo_and_topology(client):
    inventory = build_inventory(client.sinfo(), client.topology())
    assert {node.name for node in inventory.nodes} >= {"a100n1", "a100n2", "h100n1", "h100n2", "t4n1", "t4n2"}
    assert inventory.node("h100n1").capacity.gpu_type == "h100" and inventory.node("t4n1").switch == "leaf1"
    assert {node.name for node in client.show_nodes()} >= {"a100n1", "t4n2"}
    assert client.sdiag().server_thread_count >= 1
    assert isinstance(client.show_jobs(), list)


def test_reservation_round_trip():
    observer = RecordingObserver()
    client = CliSlurmClient(CommandRunner(observer=observer))
    name = f"ms-hold-test-{uuid.uuid4().hex[:8]}"
    start = datetime.now(UTC) + timedelta(hours=6)  # far ahead: nobody else's jobs are affected
    wanted = ReservationSpec(name, ("t4n2",), duration_s=600, start=start)
    try:
        # Only our own reservation is planned, so others' ms-hold-* reservations are left alone.
        assert [a.kind for a in apply_reservations(_Only(client, name), [wanted], datetime.now(UTC))] == [
            ActionKind.CREATE
        ]
        assert apply_reservations(_Only(client, name), [wanted], datetime.now(UTC)) == []
        moved = ReservationSpec(name, ("t4n1",), duration_s=600, start=start + timedelta(hours=1))
        assert [a.kind for a in apply_reservations(_Only(client, name), [moved], datetime.now(UTC))] == [
            ActionKind.UPDATE
        ]
        (mine,) = [r for r in client.reservations() if r.name == name]
        assert mine.nodes == ("t4n1",) and abs(mine.start - moved.start) < timedelta(minutes=1)
    finally:
        client.delete_reservation(name)
    assert all(r.name != name for r in client.reservations())
    # Every write named our reservation only (others' reservations come and go meanwhile).
    writes = [r.argv for r in observer.records if "show" not in r.argv]
    assert writes and all(f"ReservationName={name}" in argv for argv in writes)


class _Only:
    """_Only shows apply_reservations just one reservation name, so tests never touch others'."""

    def __init__(self, client: CliSlurmClient, name: str) -> None:
        self._client, self._name = client, name

    def reservations(self):
        return [r for r in self._client.reservations() if r.name == self._name]

    def __getattr__(self, attribute):
        return getattr(self._client, attribute)


@pytest.fixture
def unreachable_client(tmp_path):
    """unreachable_client uses the real binaries with a slurm.conf whose daemons nobody serves."""
    source = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    conf_dir = tmp_path / "slurm"
    shutil.copytree(source.parent, conf_dir)
    text = re.sub(r"(?m)^(SlurmctldPort|AccountingStoragePort)=.*$", "", (conf_dir / source.name).read_text())
    (conf_dir / source.name).write_text(text + "\nSlurmctldPort=6399\nAccountingStoragePort=6398\n")
    env = dict(os.environ, SLURM_CONF=str(conf_dir / source.name))
    return CliSlurmClient(CommandRunner(env=env))


def test_unreachable_controller_and_slurmdbd_are_transient(unreachable_client, tmp_path):
    with pytest.raises(SlurmTransient, match="Connection refused"):
        unreachable_client.sacct(datetime.now(UTC) - timedelta(hours=1))
    with pytest.raises(SlurmTransient, match="Unable to contact slurm controller"):
        unreachable_client.submit(render(launch(tmp_path, "true")))
    with pytest.raises(SlurmTransient):
        unreachable_client.squeue()  # a failed read, never "no jobs"

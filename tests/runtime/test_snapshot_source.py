"""build_snapshot: pending tasks (backoff, cancel, max_parallel), reservations, checkpoints, tenants."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from meta.cycle.snapshot.build import SpecCache, build_snapshot
from meta.model.durations import utcnow
from meta.model.kinds import JobKind
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store.models import Checkpoint, CycleRecord, Job, Task, Tenant, TenantUsage
from tests.runtime.support import checkpointing, inference, node_state, place, share, submit, training

NODES = [node_state("node1"), node_state("node2")]


def _snapshot(service: Service, now=None):
    with service.db.session() as session:
        return build_snapshot(session, NODES, SpecCache(), inventory_version=7, now=now)


def test_pending_tasks_describe_the_spec(service: Service) -> None:
    job, (t,) = submit(service, training(workers=2, topology="prefer-same-switch"))
    snap = _snapshot(service)
    (pending,) = snap.pending
    assert (pending.task_id, pending.job_id, pending.tenant) == (t, job, "acme")
    assert pending.kind == JobKind.TRAINING and pending.workers == 2
    assert pending.per_worker.gpus == 2 and pending.per_worker.gpu_type == "a100"
    assert snap.inventory_version == 7 and [n.name for n in snap.nodes] == ["node1", "node2"]


def test_pending_respects_retry_backoff(service: Service) -> None:
    _, (t,) = submit(service, training())
    later = utcnow() + timedelta(seconds=60)
    with service.db.session() as session:
        session.get(Task, t).not_before = later
    assert _snapshot(service).pending == ()
    assert [p.task_id for p in _snapshot(service, now=later + timedelta(seconds=1)).pending] == [t]


def test_pending_skips_tasks_of_a_job_being_cancelled(service: Service) -> None:
    job, _ = submit(service, training("cancelled"))
    _, (keep,) = submit(service, training("kept"))
    with service.db.session() as session:
        session.get(Job, job).cancel_requested = True  # a task still pending while the cancel lands
    assert [p.task_id for p in _snapshot(service).pending] == [keep]


def test_inference_max_parallel_reaches_the_policy_with_live_attempts(service: Service, tmp_path: Path) -> None:
    # the snapshot offers every waiting partition with the job's throttle; the policy counts the
    # live attempts (reservations) against it (tests/policy/test_throttle.py)
    job, tasks = submit(service, inference(str(tmp_path / "out"), partitions=5, max_parallel=2))
    assert [(p.task_id, p.max_parallel) for p in _snapshot(service).pending] == [(t, 2) for t in tasks]
    place(service.db, tasks[0], [share("node1", gpus=1)], AttemptState.RUNNING)
    snap = _snapshot(service)
    assert [p.task_id for p in snap.pending] == tasks[1:]
    assert [r.job_id for r in snap.reservations] == [job]


def test_reservations_include_every_live_attempt_with_its_shares(service: Service) -> None:
    db = service.db
    ids = {}
    for state in (
        AttemptState.CREATED,
        AttemptState.LAUNCHING,
        AttemptState.LAUNCH_UNKNOWN,
        AttemptState.RUNNING,
        AttemptState.STOPPING,
        AttemptState.SUCCEEDED,
    ):
        _, (t,) = submit(service, checkpointing(f"r-{state.value}"))
        ids[state] = place(db, t, [share("node1", gpus=1), share("node2", gpus=3)], state)
    snap = _snapshot(service)
    by_id = {r.attempt_id: r for r in snap.reservations}
    assert set(by_id) == {ids[s] for s in ids if s != AttemptState.SUCCEEDED}
    unknown = by_id[ids[AttemptState.LAUNCH_UNKNOWN]]
    assert [(s.node, s.resources.gpus, s.resources.gpu_type) for s in unknown.shares] == [
        ("node1", 1, "a100"),
        ("node2", 3, "a100"),
    ]
    assert unknown.gpus() == 4 and unknown.tenant == "acme"
    assert by_id[ids[AttemptState.RUNNING]].preemptible is True
    assert by_id[ids[AttemptState.STOPPING]].preemptible is False  # never a victim twice
    assert snap.pending == ()


def test_reservation_carries_the_latest_checkpoint_time(service: Service) -> None:
    db = service.db
    _, (t,) = submit(service, checkpointing())
    attempt_id = place(db, t, [share("node1")], AttemptState.RUNNING)
    base = utcnow().replace(microsecond=0)
    with db.session() as session:
        for step, minutes in ((10, 1), (30, 5), (20, 3)):
            session.add(
                Checkpoint(task_id=t, attempt_id=attempt_id, fencing_token=1, step=step, path=f"/c/{step}",
                           at=base - timedelta(minutes=10 - minutes))
            )
    (reservation,) = _snapshot(service).reservations
    assert reservation.last_checkpoint_time == (base - timedelta(minutes=5)).timestamp()
    assert reservation.restore_cost_s == 60.0


def test_reservation_without_checkpoints_has_none(service: Service) -> None:
    _, (t,) = submit(service, checkpointing())
    place(service.db, t, [share("node1")], AttemptState.RUNNING)
    (reservation,) = _snapshot(service).reservations
    assert reservation.last_checkpoint_time is None


def test_tenants_carry_quotas_weights_and_decayed_usage(service: Service) -> None:
    submit(service, training(tenant="acme"))
    submit(service, training(tenant="beta"))
    with service.db.session() as session:
        acme = session.get(Tenant, "acme")
        acme.weight, acme.guaranteed, acme.limits = 3.0, {"a100": 8}, {"a100": 16, "h100": 0}
        session.add(TenantUsage(tenant="acme", decayed_gpu_seconds=1234.5, updated_at=utcnow()))
    tenants = {t.name: t for t in _snapshot(service).tenants}
    assert set(tenants) == {"acme", "beta"}
    acme = tenants["acme"]
    assert acme.weight == 3.0 and acme.guaranteed == {"a100": 8} and acme.limit == {"a100": 16, "h100": 0}
    assert acme.decayed_usage == 1234.5
    assert tenants["beta"].decayed_usage == 0.0 and tenants["beta"].limit == {}


def test_stopping_attempt_is_marked_stopping_for_the_policy(service: Service) -> None:
    _, (t,) = submit(service, checkpointing())
    stopping = place(service.db, t, [share("node1")], AttemptState.STOPPING, stop_reason="preempt")
    _, (r,) = submit(service, checkpointing("running"))
    running = place(service.db, r, [share("node2")], AttemptState.RUNNING)
    by_id = {res.attempt_id: res for res in _snapshot(service).reservations}
    assert by_id[running].stopping is False
    assert by_id[stopping].stopping is True


def test_the_last_cycles_holds_reach_the_next_snapshot(service: Service) -> None:
    """Holds are promises across periods: the newest cycle's stored holds come back to the policy."""
    assert _snapshot(service).holds == ()
    with service.db.session() as session:
        for held in ([{"task_id": "old", "job_id": "j", "nodes": ["node2"], "planned_start": 1.0}],
                     [{"task_id": "t1", "job_id": "j1", "nodes": ["node1", "node2"], "planned_start": 2.5e9},
                      {"task_id": "bad"}]):  # a row the policy cannot read is skipped, not fatal
            session.add(CycleRecord(epoch=1, inventory_version=1, at=utcnow(), pending=1, placed=0, preempted=0,
                                    duration_s=0.0, held=held))
            session.flush()
    (hold,) = _snapshot(service).holds
    assert (hold.task_id, hold.nodes, hold.planned_start) == ("t1", ("node1", "node2"), 2.5e9)

"""Quiet periods (meta/cycle/snapshot/quiet.py): a period rests only when a full pass would find nothing to do.

Each test brings a small fake cluster to rest (every GPU busy, one job waiting), then makes one
kind of change and checks that the next period makes a full pass. Whenever a period rests, a
pass from scratch over the same store and nodes must place and preempt nothing and hold what the
last full pass held.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

import meta.cycle.apply.reasons as reasons_module
import meta.cycle.daemon as daemon_module
from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig, PeriodReport
from meta.cycle.inventory.reader import effective_nodes, held_per_node
from meta.cycle.snapshot.build import SpecCache, build_snapshot
from meta.cycle.snapshot.gates import apply_gates
from meta.model.durations import utcnow
from meta.policy.config import SchedulerConfig
from meta.policy.plan import Plan
from meta.policy.scheduler import schedule
from meta.service.api import Service
from meta.store.cluster_drains import drain
from meta.store.models import Attempt, Task, TaskReason
from slurm_bridge.errors import SlurmTransient
from slurm_bridge.fake import FakeSlurm, sinfo_node, small_cluster
from slurm_bridge.inventory import build_inventory
from slurm_bridge.parse.nodestate import node_condition
from slurm_bridge.parse.tres import Gres
from tests.runtime.support import settled, submit, training

HOLDER = "quiet-daemon"
# the package re-exports functions of these names: the modules themselves, for monkeypatching
observe_module = importlib.import_module("meta.cycle.reconcile.observe")
reconciler_module = importlib.import_module("meta.cycle.reconcile.reconciler")


def _daemon(service: Service, fake: FakeSlurm, tmp_path: Path, quiet_max_s: float = 30.0) -> Daemon:
    config = DaemonConfig(period_s=0.0, leader_lease_s=60.0, holder=HOLDER, submit_timeout_s=0.0,
                          launch=LaunchSettings(log_dir=str(tmp_path / "logs")), quiet_max_s=quiet_max_s)  # fmt: skip
    return Daemon(service.db, fake, config)


def _period(daemon: Daemon, fake: FakeSlurm) -> PeriodReport:
    report = settled(daemon)
    assert not report.error, report.error
    fake.advance()
    return report


def _fresh_plan(service: Service, fake: FakeSlurm) -> Plan:
    """_fresh_plan is what a pass from scratch decides now: new views, the nodes minus foreign work, the gates."""
    specs, now = SpecCache(), utcnow()
    inventory = build_inventory(fake.sinfo())
    with service.db.session() as session:
        nodes = effective_nodes(inventory, held_per_node(session))
        snapshot = build_snapshot(session, nodes, specs, switch_parent=inventory.switch_parent, now=now)
        gated = apply_gates(session, snapshot.pending, specs, now, False)
    return schedule(replace(snapshot, pending=tuple(gated.open)), SchedulerConfig())


def _rests(daemon: Daemon, fake: FakeSlurm, service: Service, within: int = 6) -> None:
    """_rests runs periods until one rests, and checks that a pass from scratch would have done nothing."""
    for _ in range(within):
        if _period(daemon, fake).rested:
            plan = _fresh_plan(service, fake)
            assert not plan.placements and not plan.preemptions
            assert _holds(plan.held) == _holds(daemon.quiet.held)  # a rest keeps the last pass's holds
            return
    pytest.fail(f"no period rested in {within}")


def _holds(held) -> set[tuple]:  # noqa: ANN001 - HeldReservation items
    """_holds is what a hold promises: the task, its nodes, its planned start."""
    return {(h.task_id, tuple(sorted(h.nodes)), h.planned_start, h.preempting) for h in held}


def _full(daemon: Daemon, fake: FakeSlurm) -> PeriodReport:
    report = _period(daemon, fake)
    assert not report.rested, "the period rested although something it reads changed"
    return report


@pytest.fixture
def busy(service: Service, tmp_path: Path) -> tuple[Service, FakeSlurm, Daemon, str]:
    """busy: one 8-GPU node, four 2-GPU jobs running, a fifth waiting; the daemon at rest."""
    fake = FakeSlurm(small_cluster(1))
    fake.run_ticks = 10**6
    daemon = _daemon(service, fake, tmp_path)
    for n in range(4):
        submit(service, training(f"run{n}"))
    waiting, _ = submit(service, training("waits"))
    _rests(daemon, fake, service)
    return service, fake, daemon, waiting


def test_a_quiet_period_rests_and_keeps_resting(busy) -> None:  # noqa: ANN001
    service, fake, daemon, _ = busy
    assert all(_period(daemon, fake).rested for _ in range(3))
    assert not _fresh_plan(service, fake).placements


@pytest.mark.parametrize("change", ["submit", "cancel", "hold", "release", "drain", "ends"])
def test_every_store_change_makes_a_full_pass(busy, change: str) -> None:  # noqa: ANN001
    service, fake, daemon, waiting = busy
    if change == "submit":
        submit(service, training("another"))
    elif change == "cancel":
        service.cancel(waiting)
    elif change == "hold":
        service.hold(waiting)
    elif change == "release":
        service.hold(waiting)
        _full(daemon, fake)
        _rests(daemon, fake, service)
        service.release(waiting)
    elif change == "drain":
        with service.db.session() as session:
            drain(session, fake.config.cluster_name, "maintenance", actor="admin")
    else:  # Slurm ends a running job: reconcile writes the attempt's end, the next pass places the waiter
        fake.finish(next(job.job_id for job in fake.jobs.values() if job.state == "RUNNING"))
    _full(daemon, fake)
    _rests(daemon, fake, service)


def test_a_freed_gpu_is_seen_through_the_ended_job(busy) -> None:  # noqa: ANN001
    service, fake, daemon, waiting = busy
    fake.finish(next(job.job_id for job in fake.jobs.values() if job.state == "RUNNING"))
    placed = _full(daemon, fake).placed + sum(_period(daemon, fake).placed for _ in range(2))
    assert placed == 1
    with service.db.session() as session:
        assert session.get(Task, service.status(waiting).tasks[0].id).state != "pending"


@pytest.mark.parametrize("change", ["new node", "foreign work", "drained node"])
def test_a_changed_inventory_makes_a_full_pass(busy, change: str) -> None:  # noqa: ANN001
    service, fake, daemon, _ = busy
    node = fake.nodes["node1"]
    if change == "new node":
        fake.nodes["node2"] = sinfo_node("node2")
    elif change == "foreign work":  # a plain sbatch job takes GPUs metasched does not hold: its allocation moves
        fake.nodes["node1"] = replace(node, gres_used=(Gres("gpu", "a100", 8),), alloc_cpus=8)
    else:
        fake.nodes["node1"] = replace(node, state="MIXED+DRAIN", condition=node_condition("MIXED+DRAIN"))
    _full(daemon, fake)


def test_a_failed_period_is_followed_by_a_full_pass(busy) -> None:  # noqa: ANN001
    service, fake, daemon, _ = busy
    fake.squeue_fault = SlurmTransient("slurmctld not responding")
    assert "slurm" in daemon.period().error
    fake.squeue_fault = None
    _full(daemon, fake)


def test_time_alone_ends_the_rest(busy, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The rest lasts quiet_max_s at most, and ends at a begin time that comes (a job on a free node starts then)."""
    service, fake, daemon, _ = busy
    later = utcnow() + timedelta(seconds=31)
    monkeypatch.setattr(daemon_module, "utcnow", lambda: later)
    _full(daemon, fake)
    monkeypatch.undo()
    _rests(daemon, fake, service)
    fake.nodes["node2"] = sinfo_node("node2")
    begin = utcnow() + timedelta(seconds=5)
    job, _ = submit(service, training("at-five", begin=begin.isoformat()))
    _full(daemon, fake)
    _rests(daemon, fake, service)
    assert service.status(job).state.value == "pending"
    monkeypatch.setattr(daemon_module, "utcnow", lambda: begin + timedelta(seconds=1))
    assert _full(daemon, fake).placed == 1


def test_a_pass_that_holds_a_gang_rests_until_the_hold_is_due(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A held gang's reservation stands while the daemon rests; a full pass runs a minute before its planned start."""
    fake = FakeSlurm(small_cluster(1))
    fake.run_ticks = 10**6
    daemon = _daemon(service, fake, tmp_path, quiet_max_s=24 * 3600.0)
    for n in range(4):
        submit(service, training(f"run{n}", time_limit="1h"))  # 4 × 2 GPUs: the node is full
    submit(service, training("gang", workers=2, time_limit="4h"))  # held where the running jobs end
    _rests(daemon, fake, service)
    assert daemon.quiet.held, "the gang was not held"
    due = min(hold.planned_start for hold in daemon.quiet.held) - 60
    monkeypatch.setattr(daemon_module, "utcnow", lambda: datetime.fromtimestamp(due - 5, UTC))
    assert _period(daemon, fake).rested
    monkeypatch.setattr(daemon_module, "utcnow", lambda: datetime.fromtimestamp(due + 1, UTC))
    _full(daemon, fake)


def test_quiet_max_zero_never_rests(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm(small_cluster(1))
    fake.run_ticks = 10**6
    daemon = _daemon(service, fake, tmp_path, quiet_max_s=0.0)
    for n in range(5):
        submit(service, training(f"j{n}"))
    assert not any(_period(daemon, fake).rested for _ in range(6))


def test_a_calm_reconcile_lasts_until_a_sighting_falls_due(busy, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """Slurm shows the same rows and the store did not change: squeue is read, nothing else, until a lease needs renewing."""
    service, fake, daemon, _ = busy
    _period(daemon, fake)
    calm = daemon.reconciler.calm.current(utcnow())
    assert calm is not None and len(calm.live_ids) == 4
    reads = dict(fake.calls)
    assert _period(daemon, fake).rested
    assert fake.calls["squeue"] == reads["squeue"] + 1 and fake.calls.get("sacct", 0) == reads.get("sacct", 0)
    later = calm.until + timedelta(seconds=1)
    for module in (reconciler_module, observe_module):
        monkeypatch.setattr(module, "utcnow", lambda: later)
    _period(daemon, fake)
    with service.db.session() as session:
        seen = session.scalars(select(Attempt.last_seen_at).where(Attempt.state == "running")).all()
    assert len(seen) == 4 and all(at.replace(tzinfo=None) == later.replace(tzinfo=None) for at in seen)


def test_the_oldest_wait_keeps_growing_while_the_daemon_rests(busy, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    service, fake, daemon, _ = busy

    def oldest() -> float:
        value = daemon.metrics.registry.get_sample_value("metasched_oldest_pending_seconds", {"tenant": "acme"})
        assert value is not None
        return value

    before = oldest()
    later = utcnow() + timedelta(seconds=20)
    monkeypatch.setattr(daemon_module, "utcnow", lambda: later)
    assert _period(daemon, fake).rested
    assert oldest() >= before + 19


def test_quiet_periods_write_the_reasons_a_busy_pass_left_for_later(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seven new tasks' reasons at two a period: the first pass writes two, the quiet periods after it the rest."""
    monkeypatch.setattr(reasons_module, "MAX_REASONS_PER_PERIOD", 2)
    fake = FakeSlurm(small_cluster(1))
    fake.run_ticks = 10**6
    daemon = _daemon(service, fake, tmp_path)
    for n in range(4):
        submit(service, training(f"run{n}"))
    _rests(daemon, fake, service)
    waiting = [submit(service, training(f"waits{n}"))[1][0] for n in range(7)]

    def stored() -> set[str]:
        with service.db.session() as session:
            return set(session.scalars(select(TaskReason.task_id)))

    assert not _full(daemon, fake).placed
    counts = [len(stored() & set(waiting))]
    while counts[-1] < len(waiting) and len(counts) < 8:
        assert _period(daemon, fake).rested  # writing reasons changes nothing a pass reads
        counts.append(len(stored() & set(waiting)))
    assert counts == [2, 4, 6, 7]
    assert _period(daemon, fake).rested and len(stored() & set(waiting)) == 7

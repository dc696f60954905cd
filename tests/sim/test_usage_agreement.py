"""The simulator charges fair-share usage as the daemon does: same cost weights, half-life and integral."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from meta.cycle.usage import accrue
from meta.model.durations import utcnow
from meta.model.spec import spec_from_dict
from meta.model.states import AttemptState
from meta.policy import fifo
from meta.policy.config import SchedulerConfig
from meta.service.api import Service
from meta.sim.cluster import ClusterSpec, NodeGroup
from meta.sim.config import SimConfig
from meta.sim.engine import Engine
from meta.sim.trace import TraceJob
from meta.sim.usage_ledger import UsageLedger, usage_config
from meta.store.db import Database
from meta.store.lifecycle import attempt_event, create_attempt
from meta.store.migrate import upgrade
from meta.store.models import Task, TenantUsage

# (job, tenant, GPU type, GPUs, start s, end s): three tenants on H100, A100 and T4 over ~3 h,
# starts and ends off any period grid, overlapping, one tenant idle for a long stretch.
JOBS = [
    ("h-big", "acme", "h100", 8, 0, 5400),
    ("a-mid", "acme", "a100", 4, 1234, 9000),
    ("t-many", "beta", "t4", 16, 17, 10800),
    ("a-short", "beta", "a100", 2, 3600, 3937),
    ("h-late", "beta", "h100", 2, 7777, 10001),
    ("t-one", "gamma", "t4", 1, 600, 2400),
    ("a-gap", "gamma", "a100", 8, 8000, 10500),
    ("other", "gamma", "v100", 3, 450, 9900),  # not in the cost table: the default weight
]
END = 11000.0
GRID = 300.0  # the daemon also charges between events, once a period: exactness makes that harmless


@pytest.fixture
def sqlite_service(tmp_path: Path) -> Iterator[Service]:
    """sqlite_service is the API over a fresh, migrated SQLite store of this test's own.

    Not the shared ``service`` fixture: its PostgreSQL variant is one database for every
    process, and a daemon of another run would place these pending tasks under the replay.
    """
    url = f"sqlite:///{tmp_path / 'usage.sqlite'}"
    db = Database(url)
    upgrade(db.engine, url)
    yield Service(db)
    db.dispose()


def _events() -> list[tuple[float, int, str, str, str, int]]:
    """_events is every start (+1) and end (−1) in time order."""
    out = []
    for name, tenant, gpu_type, gpus, start, end in JOBS:
        out.append((float(start), +1, name, tenant, gpu_type, gpus))
        out.append((float(end), -1, name, tenant, gpu_type, gpus))
    return sorted(out)


def _submit(service: Service, name: str, tenant: str, gpu_type: str, gpus: int) -> str:
    """_submit stores a one-task training job and returns its task id."""
    resources = {"cpus": 4, "memory": "16G", "gpus": gpus, "gpu_type": gpu_type}
    spec = {"kind": "training", "name": name, "tenant": tenant, "command": "true", "resources": resources}
    job_id = service.submit(spec_from_dict(spec)).job.id
    with service.db.session() as session:
        return session.scalars(select(Task.id).where(Task.job_id == job_id)).one()


def _start(service: Service, task_id: str, gpu_type: str, gpus: int) -> str:
    """_start places the task on one node's GPUs and walks its attempt to running; returns its id."""
    share = {"node": f"n-{task_id}", "cpus": 4, "memory_mib": 16384, "gpus": gpus, "gpu_type": gpu_type}
    with service.db.session() as session:
        attempt_id = create_attempt(session, task_id, f"test:place:{task_id}", placement=[share]).id
        for target in (AttemptState.LAUNCHING, AttemptState.RUNNING):
            attempt_event(session, attempt_id, target, f"test:{attempt_id}:{target.value}", actor="test")
    return attempt_id


def _daemon_usage(service: Service, config: SchedulerConfig) -> dict[str, float]:
    """_daemon_usage replays the events through the daemon's step on the store: accrue, then change."""
    tasks = {name: _submit(service, name, tenant, gpu_type, gpus) for name, tenant, gpu_type, gpus, _, _ in JOBS}
    t0 = utcnow().replace(microsecond=0)
    with service.db.session() as session:
        accrue(session, config, t0)  # first sight: every tenant starts at zero at t0
    times = sorted({at for at, *_ in _events()} | {GRID * k for k in range(1, int(END // GRID) + 1)} | {END})
    attempts: dict[str, str] = {}
    for at in times:
        with service.db.session() as session:
            accrue(session, config, t0 + timedelta(seconds=at))  # the rates held since the last charge
        for when, sign, name, _, gpu_type, gpus in _events():
            if when != at:
                continue
            if sign > 0:
                attempts[name] = _start(service, tasks[name], gpu_type, gpus)
            else:
                with service.db.session() as session:
                    attempt_event(session, attempts[name], AttemptState.SUCCEEDED, f"test:end:{name}", actor="test")
    with service.db.session() as session:
        return {row.tenant: row.decayed_gpu_seconds for row in session.scalars(select(TenantUsage))}


def _ledger(config: SchedulerConfig) -> UsageLedger:
    """_ledger replays the same events through the simulator's ledger."""
    ledger = UsageLedger(config, (0.0, END), {})
    for at, sign, _, tenant, gpu_type, gpus in _events():
        ledger.change(at, tenant, sign * gpus, gpu_type)
    ledger.advance(END)
    return ledger


@pytest.mark.parametrize("half_life_s", [1800.0, 7 * 86400.0])
def test_daemon_and_simulator_agree_to_the_gpu_second(sqlite_service: Service, half_life_s: float) -> None:
    config = SchedulerConfig(usage_half_life_s=half_life_s)  # h100 3, a100 2, t4 0.5, v100 1
    daemon = _daemon_usage(sqlite_service, config)
    ledger = _ledger(config)
    sim = ledger.decayed
    assert set(daemon) == set(sim) == {"acme", "beta", "gamma"}
    for tenant in sim:
        assert abs(daemon[tenant] - sim[tenant]) < 1.0, (tenant, daemon[tenant], sim[tenant])
    # cost-weighted, not raw: with a week's half-life beta's 16 T4 weigh 8, its usage is well below raw
    if half_life_s > 86400:
        raw = _ledger(SchedulerConfig(usage_half_life_s=half_life_s, gpu_cost_weights={})).decayed
        assert sim["beta"] < 0.7 * raw["beta"] and sim["acme"] > 2 * raw["acme"]
    # the windowed GPU-time (utilisation, share of the cluster) stays raw GPU-seconds
    for tenant in sim:
        want = sum(gpus * (end - start) for _, who, _, gpus, start, end in JOBS if who == tenant)
        assert ledger.in_window[tenant] == pytest.approx(want)


def test_the_engine_charges_each_jobs_gpu_type_with_the_policys_half_life() -> None:
    # one node per type; each tenant runs one job alone, so its usage has a closed form
    cluster = ClusterSpec(name="typed", node_groups=[
        NodeGroup(name="h", count=1, gpus=8, gpu_type="h100"),
        NodeGroup(name="t", count=1, gpus=8, gpu_type="t4"),
    ])
    trace = [
        TraceJob("H", 0, 3000, 8, gpu_type="h100", tenant="acme"),
        TraceJob("T", 0, 6000, 8, gpu_type="t4", tenant="beta"),
    ]
    sim = SimConfig(estimate="noise", noise_factor=1.0, warmup_hours=0.0, cycle_interval_s=0.0, idle_cycle_s=0.0)
    policy_config = SchedulerConfig(usage_half_life_s=3600.0)  # not the simulator's own 7 days
    result = Engine(trace, cluster, fifo.schedule, policy_config, sim).run()
    result.ledger.advance(6000.0)
    hl = 3600.0

    def held(rate: float, run: float, after: float) -> float:
        return rate * (1 - 0.5 ** (run / hl)) * hl / math.log(2) * 0.5 ** (after / hl)

    assert result.ledger.decayed["acme"] == pytest.approx(held(8 * 3.0, 3000, 3000))
    assert result.ledger.decayed["beta"] == pytest.approx(held(8 * 0.5, 6000, 0))


def test_baselines_are_charged_raw_gpu_time_with_the_simulators_half_life() -> None:
    config = usage_config(fifo.schedule, None, 1234.0)
    assert (config.gpu_cost("h100"), config.gpu_cost("t4"), config.usage_half_life_s) == (1.0, 1.0, 1234.0)
    from meta.policy.scheduler import schedule

    assert usage_config(schedule, None, 1234.0) == SchedulerConfig()
    ours = SchedulerConfig(usage_half_life_s=60.0)
    assert usage_config(schedule, ours, 1234.0) is ours

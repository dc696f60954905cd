"""A resting daemon never sits on work a full pass would do (issue 24, meta/cycle/snapshot/quiet.py).

A hypothesis state machine drives a daemon over a fake Slurm at random: submits (some with a
begin time, two tenants), cancels, holds and releases, Slurm ending jobs, nodes
added, drained and taken by foreign work, the clock moving by seconds to hours, and a new leader
(a replica with empty memory). After every step the daemon runs one period; whenever that period
rested, a pass from scratch — new views, the nodes minus foreign work, the gates, the policy, at
the daemon's own "now" — must place and preempt nothing, and hold exactly the gangs the last
full pass held (a rest keeps their reservations).
"""

from __future__ import annotations

import importlib
import tempfile
from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from sqlalchemy import select

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.inventory.reader import effective_nodes, held_per_node
from meta.cycle.snapshot.build import SpecCache, build_snapshot
from meta.cycle.snapshot.gates import apply_gates
from meta.model.durations import utcnow
from meta.policy.config import SchedulerConfig
from meta.policy.scheduler import schedule
from meta.service.api import Service
from meta.store.db import Database
from meta.store.migrate import upgrade
from meta.store.models import Job, Task
from slurm_bridge.fake import FakeSlurm, sinfo_node, small_cluster
from slurm_bridge.inventory import build_inventory
from slurm_bridge.parse.nodestate import node_condition
from slurm_bridge.parse.tres import Gres
from tests.runtime.support import settled, training

# every module whose "now" the period reads: the machine moves them all together
CLOCKED = [importlib.import_module(name) for name in
           ("meta.cycle.daemon", "meta.cycle.reconcile.reconciler", "meta.cycle.reconcile.observe")]  # fmt: skip


def _holds(held) -> set[tuple]:  # noqa: ANN001 - HeldReservation items
    """_holds is what a hold promises: the task, its nodes, its planned start."""
    return {(h.task_id, tuple(sorted(h.nodes)), h.planned_start, h.preempting) for h in held}


class QuietMachine(RuleBasedStateMachine):
    """QuietMachine changes the store, Slurm and the clock at random; a rested period must have missed nothing."""

    holding_rests = 0  # over all examples: rests on a pass that held a gang (the case is reached)

    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.mkdtemp()
        self.db = Database(f"sqlite:///{self.folder}/quiet.sqlite")
        upgrade(self.db.engine, self.db.url)
        self.service = Service(self.db)
        self.fake = FakeSlurm(small_cluster(2))
        self.fake.run_ticks = 10**6
        self.offset = timedelta()
        self._real = [module.utcnow for module in CLOCKED]
        for module in CLOCKED:
            module.utcnow = self._now
        self.daemon = self._replica()
        self.counter = 0
        self.rested = 0
        self.rested_holding = 0  # rests on a pass that held a gang

    def _now(self) -> datetime:
        return utcnow() + self.offset

    def _replica(self) -> Daemon:
        config = DaemonConfig(period_s=0.0, leader_lease_s=600.0, holder="machine", submit_timeout_s=0.0,
                              launch=LaunchSettings(log_dir=f"{self.folder}/logs"))  # fmt: skip
        return Daemon(self.db, self.fake, config)

    def _jobs(self, *states: str) -> list[str]:
        with self.db.session() as session:
            query = select(Job.id).join(Task, Task.job_id == Job.id).where(Task.state.in_(states)).order_by(Job.name)
            return list(dict.fromkeys(session.scalars(query)))

    @rule(gpus=st.sampled_from([2, 4, 8]), tenant=st.sampled_from(["acme", "beta"]),
          begin_s=st.sampled_from([None, None, 20, 3600]), workers=st.sampled_from([1, 1, 2]))
    def submit(self, gpus: int, tenant: str, begin_s: int | None, workers: int) -> None:
        self.counter += 1
        # gangs (2 workers) are held at their earliest start when they do not fit: a rest keeps the hold
        fields: dict = {"resources": {"cpus": 4, "memory": "16G", "gpus": gpus, "gpu_type": "a100"}, "workers": workers}
        if begin_s is not None:
            fields["begin"] = (self._now() + timedelta(seconds=begin_s)).isoformat()
        self.service.submit(training(f"job{self.counter:03d}", tenant, **fields))

    @rule(pick=st.integers(0, 50), how=st.sampled_from(["cancel", "hold", "release"]))
    def user(self, pick: int, how: str) -> None:
        jobs = self._jobs("pending", "running") if how == "cancel" else self._jobs("pending")
        if jobs:
            job = jobs[pick % len(jobs)]
            if how == "release":
                self.service.hold(job)
            getattr(self.service, how)(job)

    @rule(pick=st.integers(0, 50))
    def slurm_ends_a_job(self, pick: int) -> None:
        running = [job.job_id for job in self.fake.jobs.values() if job.state == "RUNNING"]
        if running:
            self.fake.finish(running[pick % len(running)])

    @rule(how=st.sampled_from(["add", "drain", "foreign", "clear"]))
    def nodes(self, how: str) -> None:
        node = self.fake.nodes["node1"]
        if how == "add":
            self.fake.nodes[f"node{len(self.fake.nodes) + 1}"] = sinfo_node(f"node{len(self.fake.nodes) + 1}")
        elif how == "drain":
            self.fake.nodes["node1"] = replace(node, state="MIXED+DRAIN", condition=node_condition("MIXED+DRAIN"))
        elif how == "foreign":
            self.fake.nodes["node1"] = replace(node, gres_used=(Gres("gpu", "a100", 4),), alloc_cpus=4)
        else:
            self.fake.nodes["node1"] = sinfo_node("node1")

    @rule(seconds=st.sampled_from([1, 10, 25, 40, 4000, 90000]))
    def time_passes(self, seconds: int) -> None:
        self.offset += timedelta(seconds=seconds)

    @rule()
    def new_leader(self) -> None:
        self.daemon.close_launches()
        self.daemon = self._replica()

    def _fresh_plan_is_empty(self) -> None:
        specs, now = SpecCache(), self._now()
        inventory = build_inventory(self.fake.sinfo())
        with self.db.session() as session:
            nodes = effective_nodes(inventory, held_per_node(session))
            snapshot = build_snapshot(session, nodes, specs, switch_parent=inventory.switch_parent, now=now)
            gated = apply_gates(session, snapshot.pending, specs, now, False)
        plan = schedule(replace(snapshot, pending=tuple(gated.open)), SchedulerConfig())
        assert not plan.placements and not plan.preemptions, plan
        # a rest keeps the last pass's holds (their Slurm reservations): a pass now holds the same
        assert _holds(plan.held) == _holds(self.daemon.quiet.held), (plan.held, self.daemon.quiet.held)
        self.rested_holding += bool(plan.held)
        QuietMachine.holding_rests += bool(plan.held)

    @invariant()
    def check_period(self) -> None:
        """check_period runs one period after each step; a rested one is checked against a pass from scratch."""
        report = settled(self.daemon)
        assert not report.error, report.error
        if report.rested:
            self.rested += 1
            self._fresh_plan_is_empty()
        self.fake.advance()

    def teardown(self) -> None:
        self.daemon.close_launches()
        for module, real in zip(CLOCKED, self._real, strict=True):
            module.utcnow = real
        self.db.dispose()


QuietMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=20, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_a_rested_period_misses_nothing = QuietMachine.TestCase

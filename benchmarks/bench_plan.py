"""bench_plan: ``plan history`` + ``plan calibrate`` on a store of 50,000 recorded jobs (issue 23: ≤ 60 s).

Usage (from the repo root)::

    python benchmarks/bench_plan.py                                  # 50,000 jobs in a new SQLite file
    python benchmarks/bench_plan.py --store /tmp/plan50k.sqlite      # built once, reused by later runs
    python benchmarks/bench_plan.py --db postgresql+psycopg://metasched:metasched@127.0.0.1:5432/metasched_h3
    python benchmarks/bench_plan.py --db URL --reuse                 # time a database built before

**The store** (built first, not timed) holds ``--jobs`` jobs submitted over ``--days`` days, written
through the store's own paths with a simulated clock (``Builder``): submits through
``meta.service.submission.store_jobs`` (``job_rows.write_jobs``), tenants' Fairshare through
``tenant_shares.apply_slurm_shares``, the inventory through ``inventory.save_inventory``, placements
through ``lifecycle.create_attempts`` and ``mark_launching``, clean starts and ends through
``move_attempts`` (the reconciler's bulk path), failures, losses, preemptions and cancels one by one
through ``attempt_event`` / ``cancel_job`` with their audit lines, ``metasched release`` through
``job_holds.release_job`` (audit ``job.release``), and one ``CycleRecord`` per period in which
something happened. A small in-process "daemon" decides the placements: first fit per GPU type in
the order jobs became eligible, backfilling until a task of the type has waited two hours. The
workload: five tenants (Fairshare 40/30/15/10/5), five users each; evaluations (some arrays),
inferences of 1-4 partitions, one-node trainings of 1-8 GPUs and gangs of 2-4 × 8 GPUs on A100,
H100 and T4 nodes, diurnal and weekly arrival rates; some jobs held (a tenth never released), some
with a begin time, some depending on an earlier job of their tenant (afterok / afterany), some
cancelled; attempts fail (user error, timeout: not retried; node failure, lost: retried), preemptible
ones are preempted and requeued. The cluster is sized from the demand so GPUs are ~70% busy. Jobs
still running, or waiting for a retry, at the last period are censored; jobs never started (held,
blocked dependency, still queued, cancelled while waiting) are skipped by ``plan history``.

**Timed** (in a fresh interpreter, so the peak RSS is the commands' own): ``history`` is
``history_rows`` over the window and ``write_trace`` to a CSV (what ``metasched plan history -o``
does); ``calibrate`` is what ``metasched plan calibrate`` does: ``read_site`` and ``history_rows``
as the store stood at its last cycle, ``site_cluster``, ``calibrate`` (the replay) and
``binding_quotas``. Then each command end to end, once, as a subprocess of the CLI. The target is
history + calibrate ≤ 60 s, judged on the CLI's wall times.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import json
import math
import multiprocessing
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import bindparam, func, select, text, update  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from meta.config.period import DEFAULT_PERIOD_S  # noqa: E402
from meta.model.kinds import FailureCategory  # noqa: E402
from meta.model.nodes import NodeState  # noqa: E402
from meta.model.resources import ResourceVector  # noqa: E402
from meta.model.spec import spec_from_dict, spec_hash  # noqa: E402
from meta.model.states import AttemptState, TaskState  # noqa: E402
from meta.service.job_holds import release_job  # noqa: E402
from meta.service.submission import NewJob, store_jobs  # noqa: E402
from meta.store import audit  # noqa: E402
from meta.store.db import Database  # noqa: E402
from meta.store.inventory import save_inventory  # noqa: E402
from meta.store.lifecycle import (  # noqa: E402
    NewAttempt,
    attempt_event,
    cancel_job,
    create_attempts,
    mark_launching,
    move_attempts,
)
from meta.store.migrate import upgrade  # noqa: E402
from meta.store.models import Attempt, CycleRecord, Job, Task  # noqa: E402
from meta.store.reset import truncate_all  # noqa: E402
from meta.store.tenant_shares import SlurmShares, apply_slurm_shares  # noqa: E402
from tenants.identity import Principal  # noqa: E402

TARGET_S = 60.0
DAY = 86400.0
STEP_S = 30.0  # the builder's daemon period (Slurm's main scheduler runs every 60 s): what it observes is stamped on this grid
STEPS_PER_COMMIT = 120  # an hour of simulated time per transaction
LOAD = 0.70  # GPU-seconds asked ÷ GPU-seconds the sized cluster offers
BACKFILL_GUARD_S = 7200.0  # a task of a GPU type waiting longer stops others of its type from passing it
EPOCH = 1
# the modules whose utcnow the builder's clock replaces (each imported it by name)
CLOCKED = ("meta.store.lifecycle", "meta.store.transitions", "meta.store.audit", "meta.store.inventory",
           "meta.store.tenant_shares")
TENANTS = (("vision", 0.35, 40.0), ("nlp", 0.28, 30.0), ("speech", 0.17, 15.0), ("research", 0.12, 10.0),
           ("prod", 0.08, 5.0))  # name, share of the jobs, Fairshare
USERS_PER_TENANT = 5
NODE_SHAPES = {"a100": (8, 64, 524288), "h100": (8, 96, 1048576), "t4": (4, 32, 196608)}  # GPUs, cpus, MiB
MIN_NODES = {"a100": 4, "h100": 4, "t4": 2}  # a 4-worker gang must fit
NODES_PER_LEAF = 16
LIMITS = (1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0, 172800.0)


# --- the workload -------------------------------------------------------------------------------


@dataclass
class PlannedJob:
    """PlannedJob is one job to submit: its spec (without gates filled in), when, by whom and its tasks' run times."""

    index: int
    at: float  # submit, seconds after the window's start
    tenant: str
    user: str
    spec: dict[str, Any]
    gpu_type: str
    workers: int
    gpus_per_worker: int
    runs: list[float]  # each task's run time if nothing goes wrong
    hold: bool = False
    release_at: float | None = None  # None: never released (when held)
    begin_at: float | None = None
    parent: int | None = None  # the job it depends on (index)
    dep_type: str = ""
    cancel_at: float | None = None
    checkpoint_s: float | None = None  # a checkpointing training's interval: a retry resumes from the last one


def _lognormal(rng: random.Random, median: float, sigma: float, low: float, high: float) -> float:
    """_lognormal draws a run time around ``median``, clipped to [low, high], whole seconds."""
    return float(round(min(high, max(low, median * math.exp(rng.gauss(0.0, sigma))))))


def _limit_for(rng: random.Random, run: float) -> float:
    """_limit_for is a time limit a user would ask for this run: the next standard one, sometimes a larger one."""
    fitting = [limit for limit in LIMITS if limit >= run * 1.15] or [LIMITS[-1]]
    return fitting[min(len(fitting) - 1, 1 if rng.random() < 0.3 else 0)]


def _arrivals(rng: random.Random, n: int, span: float) -> list[float]:
    """_arrivals draws n submit times over the span: busier by day than by night, weekends at half (thinning)."""
    times: list[float] = []
    while len(times) < n:
        t = rng.random() * span
        day = (t / DAY) % 7
        rate = (0.5 if day >= 5 else 1.0) * (1.0 + 0.6 * math.sin(2 * math.pi * ((t / DAY) % 1 - 0.3)))
        if rng.random() * 1.6 < rate:
            times.append(float(int(t)))
    return sorted(times)


def workload(n: int, days: float, seed: int = 23) -> list[PlannedJob]:
    """workload draws n jobs over ``days`` (see the module docstring): kinds, shapes, run times and gates."""
    rng = random.Random(seed)
    span = days * DAY
    times = _arrivals(rng, n, span - 600.0)  # submits until ten minutes before the cut (the last period)
    names, weights = zip(*((name, share) for name, share, _ in TENANTS), strict=True)
    jobs: list[PlannedJob] = []
    recent: dict[str, list[int]] = {name: [] for name in names}
    for index, at in enumerate(times):
        tenant = rng.choices(names, weights)[0]
        user = f"{tenant}-u{rng.randrange(USERS_PER_TENANT)}"
        job = _job(rng, index, at, tenant, user)
        _gates(rng, job, jobs, recent[tenant])
        recent[tenant].append(index)
        jobs.append(job)
    return jobs


def _job(rng: random.Random, index: int, at: float, tenant: str, user: str) -> PlannedJob:
    """_job draws one job's kind, shape and run times."""
    roll = rng.random()
    name = f"{tenant}-{index}"
    base: dict[str, Any] = {"name": name, "tenant": tenant}
    if roll < 0.50:  # evaluation, some of them arrays
        gpu_type = "t4" if rng.random() < 0.4 else "a100"
        run = _lognormal(rng, 900, 0.9, 60, 4 * 3600)
        count = rng.randint(2, 8) if rng.random() < 0.15 else 1
        runs = [_lognormal(rng, run, 0.3, 60, 4 * 3600) for _ in range(count)] if count > 1 else [run]
        spec = base | {"kind": "evaluation", "command": "python eval.py", "time_limit": _limit_for(rng, max(runs))}
        if count > 1:
            spec["array"] = {"indexes": sorted(rng.sample(range(count * 2), count))}
        workers, per_worker, checkpoint = 1, 1, None
    elif roll < 0.70:  # inference over partitions (preemptible: the spec's default)
        gpu_type = "t4" if rng.random() < 0.5 else "a100"
        run = _lognormal(rng, 1500, 0.8, 120, 6 * 3600)
        runs = [_lognormal(rng, run, 0.2, 60, 8 * 3600) for _ in range(rng.randint(1, 4))]
        spec = base | {"kind": "inference", "command": "python infer.py", "partitions": len(runs),
                       "output": f"/data/out/{name}", "time_limit": _limit_for(rng, max(runs))}
        workers, per_worker, checkpoint = 1, 1, None
    else:  # training: one node, or a gang of 2-4 whole nodes
        gang = roll >= 0.955
        gpu_type = ("h100" if rng.random() < 0.7 else "a100") if gang else rng.choice(("a100", "h100"))
        workers = rng.randint(2, 4) if gang else 1
        per_worker = 8 if gang else rng.choices((1, 2, 4, 8), (0.3, 0.3, 0.25, 0.15))[0]
        runs = [_lognormal(rng, 3 * 3600 if gang else 3600, 1.0, 300, 40 * 3600)]
        spec = base | {"kind": "training", "command": "python train.py", "workers": workers,
                       "time_limit": _limit_for(rng, runs[0])}
        checkpoint = None
        if rng.random() < 0.25:
            checkpoint = 1800.0
            spec |= {"preemptible": True, "checkpoint": {"dir": f"/data/ckpt/{name}", "interval": "30m"}}
    cpus = NODE_SHAPES[gpu_type][1] // NODE_SHAPES[gpu_type][0]
    spec["resources"] = {"cpus": cpus * per_worker, "memory": f"{32 * per_worker}G", "gpus": per_worker,
                         "gpu_type": gpu_type}
    if rng.random() < 0.02:  # a run past its limit: Slurm ends it at the limit (timeout)
        runs = [max(r, spec["time_limit"] * 1.5) for r in runs]
    return PlannedJob(index, at, tenant, user, spec, gpu_type, workers, per_worker, runs, checkpoint_s=checkpoint)


def _gates(rng: random.Random, job: PlannedJob, earlier: list[PlannedJob], same_tenant: list[int]) -> None:
    """_gates draws a job's hold, begin time, dependency and cancel (each rare)."""
    if rng.random() < 0.03:
        job.hold = True
        job.release_at = None if rng.random() < 0.1 else job.at + _lognormal(rng, 1800, 1.0, 60, 12 * 3600)
    if rng.random() < 0.02:
        job.begin_at = job.at + rng.uniform(600, 6 * 3600)
    if rng.random() < 0.06:
        # an earlier job of the tenant, submitted at least a period before (its short id is known by then)
        candidates = [i for i in same_tenant[-40:] if earlier[i].at < job.at - STEP_S and earlier[i].at > job.at - 12 * 3600]
        if candidates:
            job.parent = rng.choice(candidates)
            job.dep_type = "afterok" if rng.random() < 0.7 else "afterany"
    if rng.random() < 0.025:
        job.cancel_at = job.at + _lognormal(rng, 3600, 1.2, 30, 2 * DAY)


def inventory(jobs: list[PlannedJob], days: float, load: float = LOAD) -> tuple[list[NodeState], dict[str, str]]:
    """inventory sizes the cluster from the demand (``load`` of the GPUs busy) as the daemon saves it: nodes and switches."""
    demand: dict[str, float] = dict.fromkeys(NODE_SHAPES, 0.0)
    for job in jobs:
        limit = float(job.spec["time_limit"])
        demand[job.gpu_type] += sum(min(run, limit) for run in job.runs) * job.workers * job.gpus_per_worker
    nodes: list[NodeState] = []
    switch_parent: dict[str, str] = {}
    for gpu_type, (gpus, cpus, memory) in NODE_SHAPES.items():
        count = max(MIN_NODES[gpu_type], math.ceil(demand[gpu_type] / (days * DAY * load * gpus)))
        for i in range(count):
            leaf = f"{gpu_type}-leaf{i // NODES_PER_LEAF}"
            switch_parent[leaf] = "spine"
            nodes.append(NodeState(
                name=f"{gpu_type}n{i:03d}", capacity=ResourceVector(cpus=cpus, memory_mib=memory, gpus=gpus, gpu_type=gpu_type),
                partitions=("gpu", gpu_type), switch=leaf,
            ))  # fmt: skip
    return nodes, switch_parent


# --- the store's clock ----------------------------------------------------------------------------


class Clock:
    """Clock is the store's time while the builder writes: ``at(s)`` sets it to the window's start + s."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self.now = start

    def at(self, seconds: float) -> datetime:
        """at moves the clock to start + ``seconds`` and returns it."""
        self.now = self.start + timedelta(seconds=seconds)
        return self.now


@contextmanager
def clocked(clock: Clock) -> Iterator[Clock]:
    """clocked makes the store's writers read ``clock`` (as the tests' clock does), and restores them after."""
    modules = [sys.modules[name] for name in CLOCKED]
    saved = [module.utcnow for module in modules]  # type: ignore[attr-defined]
    for module in modules:
        module.utcnow = lambda: clock.now  # type: ignore[attr-defined]
    try:
        yield clock
    finally:
        for module, original in zip(modules, saved, strict=True):
            module.utcnow = original  # type: ignore[attr-defined]


# --- the builder: a small daemon that writes the history ------------------------------------------


@dataclass
class TaskRun:
    """TaskRun is one task as the builder follows it (mirrors the store's task state)."""

    task_id: str
    job: int
    index: int
    run_s: float  # run time still to do
    state: str = TaskState.PENDING.value
    started: bool = False  # an attempt of it reached running
    attempt: str | None = None  # the live attempt
    key: tuple[float, int, int] = (0.0, 0, 0)  # queue order: (eligible, job, index)


@dataclass
class LiveAttempt:
    """LiveAttempt is a live attempt: where it runs, and how and when it ends."""

    attempt_id: str
    task_id: str
    shares: list[tuple[str, int]]  # (node, GPUs) per worker
    state: str = AttemptState.LAUNCHING.value
    started_at: float = 0.0
    end_at: float = math.inf
    end: str = "succeeded"  # succeeded | user_error | timeout | node_failure | lost | preempt


@dataclass
class Built:
    """Built is what the builder wrote and what ``plan history`` must find in it."""

    since: str
    until: str
    jobs: int
    tasks: int
    nodes: int
    gpus: int
    attempts: int
    rows: int  # tasks with an attempt started before the cut
    censored: int  # ... whose task had not ended at the cut
    never_started: int
    preemptions: int
    cancels: int
    releases: int
    cycles: int
    build_s: float = 0.0


class Builder:
    """Builder plays the workload through the store's write paths on a simulated clock (see the module docstring)."""

    def __init__(self, db: Database, jobs: list[PlannedJob], nodes: list[NodeState], switch_parent: dict[str, str],
                 start: datetime, days: float, seed: int = 23) -> None:
        self.db = db
        self.plan = jobs
        self.nodes = nodes
        self.switch_parent = switch_parent
        self.clock = Clock(start)
        self.span = days * DAY
        self.rng = random.Random(seed + 1)
        self.free = {node.name: node.capacity.gpus for node in nodes}
        self.by_type: dict[str, list[str]] = {}
        for node in nodes:
            self.by_type.setdefault(node.capacity.gpu_type or "", []).append(node.name)
        self.events: list[tuple[float, int, str, Any]] = []  # (time, seq, kind, subject)
        self.seq = 0
        self.job_ids: dict[int, str] = {}
        self.short_ids: dict[int, str] = {}
        self.tasks: dict[str, TaskRun] = {}
        self.job_tasks: dict[int, list[str]] = {}
        self.live: dict[str, LiveAttempt] = {}
        self.waiting: list[tuple[tuple[float, int, int], str]] = []  # sorted by key: the eligible tasks
        self.children: dict[int, list[int]] = {}
        self.gate_open: dict[int, set[str]] = {}  # job -> the gates still closed: hold, begin, dep
        self.cancelled: set[int] = set()
        self.ended_jobs: dict[int, bool] = {}  # job -> all its tasks succeeded
        self.dirty = True
        self.counts = {"attempts": 0, "preemptions": 0, "cancels": 0, "releases": 0, "cycles": 0}
        self.principals: dict[str, Principal] = {}

    # -- events --

    def push(self, at: float, kind: str, subject: Any) -> None:
        """push schedules an event."""
        self.seq += 1
        heapq.heappush(self.events, (at, self.seq, kind, subject))

    def principal(self, job: PlannedJob) -> Principal:
        """principal is the job's submitter as the API knows it: a member of its tenant."""
        found = self.principals.get(job.user)
        if found is None:
            uid = 5000 + len(self.principals)
            found = Principal(name=job.user, uid=uid, gid=uid, accounts=frozenset({job.tenant}), default_account=job.tenant)
            self.principals[job.user] = found
        return found

    def run(self) -> Built:
        """run writes the whole history: the site first, then every period with something to do; returns the tally."""
        started = time.perf_counter()
        with clocked(self.clock):
            with self.db.session() as session:
                self.clock.at(0.0)
                apply_slurm_shares(session, [SlurmShares(name, weight, {}) for name, _, weight in TENANTS])
                save_inventory(session, self.nodes, 1, self.switch_parent, ["high", "low", "normal"])
            for job in self.plan:
                self.push(job.at, "submit", job.index)
            last = math.floor((self.span - 1.0) / STEP_S) * STEP_S  # the last period before the cut
            step = 0.0
            while step <= last:
                with self.db.session() as session:
                    for _ in range(STEPS_PER_COMMIT):
                        if step > last:
                            break
                        self.period(session, step)
                        step = self._next_step(step, last)
            with self.db.session() as session:
                self._cycle_record(session, self.span, 0, 0)  # the cut: the daemon's last cycle
        return self._tally(time.perf_counter() - started)

    def _next_step(self, step: float, last: float) -> float:
        """_next_step is the next period with something to do (every period while work could be placed)."""
        following = step + STEP_S
        if self.dirty and self.waiting:
            return following
        if not self.events:
            return last + STEP_S
        return max(following, math.ceil(self.events[0][0] / STEP_S) * STEP_S)

    def period(self, session: Session, step: float) -> None:
        """period applies what happened up to ``step`` (users' requests at their own times), then reconciles and places."""
        starting: list[str] = []
        ending: list[LiveAttempt] = []
        while self.events and self.events[0][0] <= step:
            at, _, kind, subject = heapq.heappop(self.events)
            if kind == "submit":
                self._submit(session, at, [subject])
            elif kind == "release":
                self._release(session, at, subject)
            elif kind == "cancel":
                self._cancel(session, at, subject)
            elif kind == "open":
                self._open(subject[0], subject[1], at)
            elif kind == "ready":
                self._wait(subject)
            elif kind == "start":
                starting.append(subject)
            elif kind == "end":
                attempt = self.live.get(subject)
                if attempt is not None and attempt.state == AttemptState.RUNNING.value:
                    ending.append(attempt)
            elif kind == "stopped":
                attempt = self.live.get(subject)
                if attempt is not None and attempt.state == AttemptState.STOPPING.value:
                    ending.append(attempt)
        self.clock.at(step)
        changed = self._reconcile(session, step, starting, ending)
        placed, preempted = self._place(session, step) if self.dirty else (0, 0)
        if changed or placed or preempted:
            self._cycle_record(session, step, placed, preempted)

    # -- what users do --

    def _submit(self, session: Session, at: float, indexes: list[int]) -> None:
        """_submit stores jobs as the API does (one request each), with their dependency on the parent's short id."""
        for index in indexes:
            job = self.plan[index]
            self.clock.at(at)
            data = dict(job.spec)
            if job.hold:
                data["hold"] = True
            if job.begin_at is not None:
                data["begin"] = self.clock.at(job.begin_at).isoformat()
            if job.parent is not None:
                data["dependency"] = f"{job.dep_type}:{self.short_ids[job.parent]}"
            spec = spec_from_dict(data)
            now = self.clock.at(at)
            (stored,) = store_jobs(session, [NewJob(spec, spec_hash(spec))], self.principal(job), "/home/" + job.user, now)
            self.job_ids[index], self.short_ids[index] = stored.job.id, stored.job.short_id
            tasks = session.execute(select(Task.id, Task.index).where(Task.job_id == stored.job.id).order_by(Task.index))
            self.job_tasks[index] = []
            for task_id, task_index in tasks:
                self.tasks[task_id] = TaskRun(task_id, index, task_index, job.runs[task_index])
                self.job_tasks[index].append(task_id)
            closed = set()
            if job.hold:
                closed.add("hold")
                if job.release_at is not None:
                    self.push(job.release_at, "release", index)
            if job.begin_at is not None:
                closed.add("begin")
                self.push(job.begin_at, "open", (index, "begin"))
            if job.parent is not None:
                parent_done = self.ended_jobs.get(job.parent)
                if parent_done is None:
                    closed.add("dep")
                    self.children.setdefault(job.parent, []).append(index)
                elif job.dep_type == "afterok" and not parent_done:
                    closed.add("never")  # the dependency can never be satisfied: the job waits for ever
            self.gate_open[index] = closed
            if job.cancel_at is not None:
                self.push(job.cancel_at, "cancel", index)
            if not closed:
                self._open(index, "", at)

    def _open(self, index: int, gate: str, at: float) -> None:
        """_open opens one gate of a job; when none is left its tasks join the queue."""
        closed = self.gate_open[index]
        closed.discard(gate)
        if closed or index in self.cancelled:
            return
        for position, task_id in enumerate(self.job_tasks[index]):
            task = self.tasks[task_id]
            task.key = (at, index, position)
            if task.state == TaskState.PENDING.value and task.attempt is None:
                self._wait(task_id)

    def _wait(self, task_id: str) -> None:
        """_wait puts a pending task in the queue at its place."""
        task = self.tasks[task_id]
        if task.state != TaskState.PENDING.value or task.job in self.cancelled:
            return
        bisect.insort(self.waiting, (task.key, task_id))
        self.dirty = True

    def _release(self, session: Session, at: float, index: int) -> None:
        """_release is ``metasched release`` by the job's owner (audited ``job.release``)."""
        if index in self.cancelled:
            return
        self.clock.at(at)
        job = session.get(Job, self.job_ids[index])
        assert job is not None
        release_job(session, job, self.principal(self.plan[index]))
        self.counts["releases"] += 1
        self._open(index, "hold", at)

    def _cancel(self, session: Session, at: float, index: int) -> None:
        """_cancel is ``metasched cancel`` by the owner: waiting tasks end, live attempts are stopped."""
        self.clock.at(at)
        job = session.get(Job, self.job_ids[index])
        assert job is not None
        user = self.plan[index].user
        if not job.cancel_requested:
            audit.record(session, user, "job.cancel", job.short_id, tenant=job.tenant)
        cancel_job(session, job, user)
        self.cancelled.add(index)
        self.counts["cancels"] += 1
        removed = False
        for task_id in self.job_tasks[index]:
            task = self.tasks[task_id]
            if task.state == TaskState.PENDING.value:
                task.state = TaskState.CANCELLED.value
                removed = True
            elif task.attempt is not None:
                attempt = self.live[task.attempt]
                if attempt.state == AttemptState.STOPPING.value:
                    continue  # a preempted victim already stopping: it ends as it would (cancelled by the store)
                attempt.state, attempt.end = AttemptState.STOPPING.value, "cancelled"
                self.push(math.ceil(at / STEP_S) * STEP_S + STEP_S, "stopped", attempt.attempt_id)
        if removed:
            self.waiting = [entry for entry in self.waiting if self.tasks[entry[1]].job != index]
        self._job_progress(index, at)

    # -- what the daemon does each period --

    def _reconcile(self, session: Session, step: float, starting: list[str], ending: list[LiveAttempt]) -> bool:
        """_reconcile moves launched attempts to running and ended ones to their end, as the reconciler would."""
        running = {aid: f"slurm:{aid}:running" for aid in starting if self.live[aid].state == AttemptState.LAUNCHING.value}
        if running:
            move_attempts(session, running, AttemptState.LAUNCHING, AttemptState.RUNNING, reason="running in Slurm",
                          actor="reconciler")
            for aid in running:
                self._started(self.live[aid], step)
        clean = {a.attempt_id: f"slurm:{a.attempt_id}:done" for a in ending if a.end == "succeeded"}
        if clean:
            move_attempts(session, clean, AttemptState.RUNNING, AttemptState.SUCCEEDED, reason="completed in Slurm",
                          actor="reconciler", values={"exit_code": 0})
        for attempt in ending:
            if attempt.end == "succeeded":
                self._ended(attempt, TaskState.SUCCEEDED.value, step)
            else:
                self._end_one(session, attempt, step)
        return bool(running or ending)

    def _started(self, attempt: LiveAttempt, step: float) -> None:
        """_started decides how the running attempt will end (the workload's odds) and when."""
        task = self.tasks[attempt.task_id]
        job = self.plan[task.job]
        attempt.state, attempt.started_at = AttemptState.RUNNING.value, step
        task.started, task.state = True, TaskState.RUNNING.value
        limit = float(job.spec["time_limit"])
        preemptible = job.checkpoint_s is not None or job.spec["kind"] == "inference"
        roll = self.rng.random()
        if roll < 0.03:
            attempt.end, length = "user_error", task.run_s * self.rng.uniform(0.02, 0.9)
        elif roll < 0.045:
            attempt.end, length = "node_failure", task.run_s * self.rng.uniform(0.05, 0.95)
        elif roll < 0.048:
            attempt.end, length = "lost", task.run_s * self.rng.uniform(0.05, 0.95)
        elif preemptible and roll < 0.13:
            attempt.end, length = "preempt", task.run_s * self.rng.uniform(0.05, 0.95)
        elif task.run_s > limit:
            attempt.end, length = "timeout", limit
        else:
            attempt.end, length = "succeeded", task.run_s
        attempt.end_at = step + max(1.0, length)
        self.push(attempt.end_at, "end", attempt.attempt_id)

    def _end_one(self, session: Session, attempt: LiveAttempt, step: float) -> None:
        """_end_one follows an attempt that did not end cleanly, one at a time (the store decides a retry)."""
        aid = attempt.attempt_id
        if attempt.end == "preempt" and attempt.state == AttemptState.RUNNING.value:
            # the cycle marks the victim; the reconciler sees it stopped a period later
            attempt_event(session, aid, AttemptState.STOPPING, f"cycle:{int(step)}:preempt", reason="preempted: a higher priority task",
                          actor="scheduler", values={"stop_reason": "preempt"})
            task = self.tasks[attempt.task_id]
            audit.record(session, f"scheduler/epoch-{EPOCH}", "preempt", aid, tenant=self.plan[task.job].tenant,
                         reason="a higher priority task", lost_gpu_seconds=0.0)
            attempt.state = AttemptState.STOPPING.value
            self.counts["preemptions"] += 1
            self.push(step + STEP_S, "stopped", aid)
            return
        target, category = {
            "user_error": (AttemptState.FAILED, FailureCategory.USER_ERROR),
            "timeout": (AttemptState.FAILED, FailureCategory.TIMEOUT),
            "node_failure": (AttemptState.FAILED, FailureCategory.NODE_FAILURE),
            "lost": (AttemptState.LOST, None),
            "preempt": (AttemptState.PREEMPTED, None),
            "cancelled": (AttemptState.CANCELLED, None),
        }[attempt.end]
        attempt_event(session, aid, target, f"slurm:{aid}:{attempt.end}", reason=attempt.end, actor="reconciler",
                      failure_category=category, values={"exit_code": 1} if target == AttemptState.FAILED else None)
        state = session.scalar(select(Task.state).where(Task.id == attempt.task_id))
        assert state is not None
        self._ended(attempt, state, step)

    def _ended(self, attempt: LiveAttempt, task_state: str, step: float) -> None:
        """_ended frees the attempt's GPUs and follows its task: done, or back in the queue after its backoff."""
        del self.live[attempt.attempt_id]
        for node, gpus in attempt.shares:
            self.free[node] += gpus
        self.dirty = True
        task = self.tasks[attempt.task_id]
        task.attempt, task.state = None, task_state
        job = self.plan[task.job]
        if attempt.state != AttemptState.LAUNCHING.value:
            ran = step - attempt.started_at
            if job.checkpoint_s:  # resumes from its last checkpoint
                task.run_s = max(60.0, task.run_s - math.floor(ran / job.checkpoint_s) * job.checkpoint_s)
        if task_state == TaskState.PENDING.value:
            backoff = 0.0 if attempt.end == "preempt" else 30.0  # the spec's default retry backoff
            self.push(step + backoff, "ready", task.task_id)
        self._job_progress(task.job, step)

    def _job_progress(self, index: int, step: float) -> None:
        """_job_progress notes a job that ended, and opens (or dooms) the jobs that depend on it."""
        if index in self.ended_jobs:
            return
        states = [self.tasks[t].state for t in self.job_tasks[index]]
        if any(s not in (TaskState.SUCCEEDED.value, TaskState.FAILED.value, TaskState.CANCELLED.value) for s in states):
            return
        ok = all(s == TaskState.SUCCEEDED.value for s in states)
        self.ended_jobs[index] = ok
        for child in self.children.pop(index, []):
            if self.plan[child].dep_type == "afterany" or ok:
                self.push(step, "open", (child, "dep"))
            else:
                self.gate_open[child].add("never")

    def _place(self, session: Session, step: float) -> tuple[int, int]:
        """_place is the cycle: first fit per GPU type in queue order, then the launches (see the module docstring)."""
        self.dirty = False
        wanted: list[NewAttempt] = []
        shares_of: dict[str, list[tuple[str, int]]] = {}
        blocked: set[str] = set()
        kept: list[tuple[tuple[float, int, int], str]] = []
        most = {t: max((self.free[n] for n in names), default=0) for t, names in self.by_type.items()}
        for entry in self.waiting:
            task = self.tasks[entry[1]]
            job = self.plan[task.job]
            gpu_type = job.gpu_type
            shares = None
            if gpu_type not in blocked and most[gpu_type] >= job.gpus_per_worker:
                shares = self._fit(gpu_type, job.workers, job.gpus_per_worker)
            if shares is None:
                kept.append(entry)
                if step - entry[0][0] > BACKFILL_GUARD_S:
                    blocked.add(gpu_type)
                continue
            for node, gpus in shares:
                self.free[node] -= gpus
            most[gpu_type] = max(self.free[n] for n in self.by_type[gpu_type])
            shares_of[task.task_id] = shares
            wanted.append(NewAttempt(task.task_id, [self._share(node, gpus, job) for node, gpus in shares],
                                     f"placed on {','.join(sorted({n for n, _ in shares}))}"))
        self.waiting = kept
        if not wanted:
            return 0, 0
        cycle = self.counts["cycles"] + 1
        created = create_attempts(session, wanted, f"cycle:{cycle}:place", epoch=EPOCH)
        ids = list(created.values())
        mark_launching(session, ids, AttemptState.CREATED)
        table = Attempt.__table__
        session.execute(  # Core executemany: one statement for the burst (the ORM would want primary keys)
            update(table).where(table.c.id == bindparam("b_id"))
            .values(slurm_job_id=bindparam("b_sid"), last_seen_at=bindparam("b_seen"), version=table.c.version + 1),
            [{"b_id": aid, "b_sid": str(100000 + self.counts["attempts"] + i), "b_seen": self.clock.now}
             for i, aid in enumerate(ids)],
        )  # the actuator's record_slurm_job_id, for the whole launch burst
        self.counts["attempts"] += len(ids)
        for task_id, aid in created.items():
            task = self.tasks[task_id]
            task.state, task.attempt = TaskState.SCHEDULED.value, aid
            self.live[aid] = LiveAttempt(aid, task_id, shares_of[task_id])
            self.push(step + STEP_S, "start", aid)  # Slurm starts it by the next period
        return len(ids), 0

    def _fit(self, gpu_type: str, workers: int, per_worker: int) -> list[tuple[str, int]] | None:
        """_fit picks nodes for the workers: the fullest node that fits a lone worker, distinct nodes for a gang."""
        fitting = [n for n in self.by_type[gpu_type] if self.free[n] >= per_worker]
        if len(fitting) < workers:
            return None
        fitting.sort(key=lambda n: (self.free[n], n))
        return [(node, per_worker) for node in fitting[:workers]]

    def _share(self, node: str, gpus: int, job: PlannedJob) -> dict[str, Any]:
        """_share is one worker's node share as the cycle stores it (``share_to_json``)."""
        per_gpu = NODE_SHAPES[job.gpu_type][1] // NODE_SHAPES[job.gpu_type][0]
        return {"node": node, "cpus": float(per_gpu * gpus), "memory_mib": 32768 * gpus, "gpus": gpus,
                "gpu_type": job.gpu_type, "storage_gib": 0, "network": None}

    def _cycle_record(self, session: Session, step: float, placed: int, preempted: int) -> None:
        """_cycle_record is the period's summary row, as ``apply_plan`` writes it."""
        self.counts["cycles"] += 1
        session.add(CycleRecord(epoch=EPOCH, inventory_version=1, at=self.clock.at(step), pending=len(self.waiting),
                                placed=placed, preempted=preempted, duration_s=0.01, fragmentation={}, held=[]))

    def _tally(self, build_s: float) -> Built:
        """_tally is what the history must show: rows, censored and never-started tasks (from the builder's own view)."""
        rows = sum(1 for t in self.tasks.values() if t.started)
        done = (TaskState.SUCCEEDED.value, TaskState.FAILED.value, TaskState.CANCELLED.value)
        censored = sum(1 for t in self.tasks.values() if t.started and t.state not in done)
        return Built(
            since=self.clock.start.isoformat(), until=(self.clock.start + timedelta(seconds=self.span)).isoformat(),
            jobs=len(self.job_ids), tasks=len(self.tasks), nodes=len(self.nodes),
            gpus=sum(n.capacity.gpus for n in self.nodes), attempts=self.counts["attempts"], rows=rows, censored=censored,
            never_started=len(self.tasks) - rows, preemptions=self.counts["preemptions"], cancels=self.counts["cancels"],
            releases=self.counts["releases"], cycles=self.counts["cycles"], build_s=build_s,
        )


def window_start(days: float, now: datetime | None = None) -> datetime:
    """window_start is ``days`` before the last whole minute: the history ends just before the build."""
    now = now or datetime.now(UTC)
    return now.replace(second=0, microsecond=0) - timedelta(days=days)


def build_store(db: Database, n: int, days: float, seed: int = 23, start: datetime | None = None) -> Built:
    """build_store writes a history of ``n`` jobs over ``days`` into an empty migrated store; returns the tally."""
    jobs = workload(n, days, seed)
    nodes, switch_parent = inventory(jobs, days)
    built = Builder(db, jobs, nodes, switch_parent, start or window_start(days), days, seed).run()
    if db.dialect == "postgresql":  # a site's store has been analyzed by autovacuum long before anyone asks
        with db.engine.connect() as connection:
            connection.execute(text("ANALYZE"))
            connection.commit()
    return built


def open_empty(url: str) -> Database:
    """open_empty is the store at ``url`` migrated and emptied (a new SQLite file, or a PostgreSQL database)."""
    db = Database(url)
    upgrade(db.engine, url)
    if db.dialect == "postgresql":
        truncate_all(db)
        return db
    with db.session() as session:
        if session.scalar(select(func.count()).select_from(Job)):
            db.dispose()
            raise SystemExit(f"{url} already holds jobs: give --store to reuse it, or a new file")
    return db


def stored_window(url: str) -> tuple[str, str, int]:
    """stored_window is a built store's window: its first submit, its last cycle (the cut) and its jobs."""
    db = Database(url)
    try:
        with db.session() as session:
            first = session.scalar(select(func.min(Job.submitted_at)))
            last = session.scalar(select(func.max(CycleRecord.at)))
            jobs = session.scalar(select(func.count()).select_from(Job)) or 0
    finally:
        db.dispose()
    if first is None or last is None:
        raise SystemExit(f"{url}: no history in this store (build it first)")
    return first.isoformat(), last.isoformat(), jobs


# --- the timed part ----------------------------------------------------------------------------------


def measure(url: str, since: str, until: str, period: float, csv_path: str) -> dict[str, Any]:
    """measure times history (export + CSV) and calibrate (site, export at the last cycle, replay) as the CLI runs them."""
    from meta.model.durations import utcnow
    from meta.plan.calibrate import MIN_JOBS, calibrate
    from meta.plan.history import history_rows
    from meta.plan.site import binding_quotas, read_site, site_cluster
    from meta.plan.trace_csv import write_trace
    from meta.sim import policies

    start, end = datetime.fromisoformat(since), datetime.fromisoformat(until)
    figures: dict[str, Any] = {}
    db = Database(url)
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        with db.session() as session:
            export = history_rows(session, start, end, utcnow())
        t1 = time.perf_counter()
        partial = Path(csv_path + ".partial")
        with partial.open("w", encoding="utf-8", newline="") as handle:
            write_trace(export.rows, handle)
        partial.replace(csv_path)
        c2, t2 = time.process_time(), time.perf_counter()
        figures.update(history_s=t2 - t0, history_cpu_s=c2 - c0, history_read_s=t1 - t0, history_csv_s=t2 - t1, rows=len(export.rows),
                       censored=export.censored, never_started=export.skipped_never_started,
                       bad_spec=export.skipped_bad_spec, jobs=export.jobs)
        c3, t3 = time.process_time(), time.perf_counter()
        policy, config = policies.resolve("metasched")
        with db.session() as session:
            site = read_site(session)
            seen = min(utcnow(), site.last_cycle_at) if site.last_cycle_at else utcnow()
            again = history_rows(session, start, end, seen)
        assert site.nodes is not None, "the store has no inventory"
        cluster = site_cluster(site.nodes, site.switch_parent)
        t4 = time.perf_counter()
        result = calibrate(again, cluster, site.weights(), config, period, min_jobs=MIN_JOBS, policy=policy)
        binding_quotas(site.tenants, cluster)
        c5, t5 = time.process_time(), time.perf_counter()
    finally:
        db.dispose()
    figures.update(calibrate_s=t5 - t3, calibrate_cpu_s=c5 - c3, calibrate_read_s=t4 - t3, replay_s=t5 - t4, replayed=result.replayed,
                   unplaced=result.unplaced, verdict=result.verdict(), mean_queue_s=result.mean.as_dict(),
                   p95_queue_s=result.p95.as_dict(), utilization=result.utilization.as_dict(4),
                   cluster_gpus=cluster.total_gpus(), cluster_nodes=cluster.node_count(),
                   rss_peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return figures


def measure_fresh(url: str, since: str, until: str, period: float, csv_path: str) -> dict[str, Any]:
    """measure_fresh runs ``measure`` in a new interpreter: its peak RSS is the commands' alone, not the builder's."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(measure, (url, since, until, period, csv_path))


def run_cli(args: list[str]) -> dict[str, Any]:
    """run_cli runs ``metasched ARGS`` as a new process: wall seconds, peak RSS (MiB) and exit status."""
    command = [sys.executable, "-c", "from cli.main import main; main()", *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=err)
        # wait4 gives this child's own rusage (RUSAGE_CHILDREN would be the largest of every child so far)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"wall_s": wall, "rc": child.returncode, "rss_peak_mib": usage.ru_maxrss / 1024,
                "stdout_tail": out.read().decode(errors="replace")[-400:],
                "stderr_tail": err.read().decode(errors="replace")[-400:]}


def cli_times(url: str, since: str, until: str, csv_path: str) -> dict[str, Any]:
    """cli_times runs ``plan history -o`` and ``plan calibrate --json`` once each, end to end."""
    history = run_cli(["--db", url, "plan", "history", "--since", since, "--until", until, "-o", csv_path])
    calibration = run_cli(["--db", url, "plan", "calibrate", "--since", since, "--until", until, "--json"])
    return {"history": history, "calibrate": calibration}


def main(argv: list[str] | None = None) -> int:
    """main builds (or reuses) the store, times the phases and the CLI, and prints the figures (JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50_000, help="recorded jobs to build (default 50,000)")
    parser.add_argument("--days", type=float, default=14.0, help="the window the jobs were submitted over")
    parser.add_argument("--seed", type=int, default=23, help="the workload's random seed")
    parser.add_argument("--db", default=None, help="a PostgreSQL (or SQLite) URL to build into (emptied first)")
    parser.add_argument("--reuse", action="store_true", help="with --db: time the history already built there")
    parser.add_argument("--store", default=None,
                        help="a SQLite file: built when missing, reused otherwise (default: a new temporary file)")
    parser.add_argument("--no-cli", action="store_true", help="skip the end-to-end CLI runs")
    parser.add_argument("--json", default=None, help="also write every figure to this file")
    args = parser.parse_args(argv)
    if args.db and args.store:
        parser.error("give --db or --store, not both")
    built: Built | None = None
    if args.db:
        url = args.db
        reuse = args.reuse
    else:
        path = Path(args.store) if args.store else Path(tempfile.mkdtemp()) / "plan.sqlite"
        url, reuse = f"sqlite:///{path}", path.exists()
    if not reuse:
        db = open_empty(url)
        try:
            print(f"building {args.jobs:,} jobs over {args.days:g} days into {_redacted(url)} ...", flush=True)
            built = build_store(db, args.jobs, args.days, args.seed)
        finally:
            db.dispose()
        print(f"built in {built.build_s:.0f} s: {built.jobs:,} jobs, {built.tasks:,} tasks, {built.attempts:,} attempts, "
              f"{built.nodes} nodes / {built.gpus} GPUs, {built.rows:,} rows expected ({built.censored:,} censored, "
              f"{built.never_started:,} never started), {built.preemptions:,} preemptions, {built.cancels:,} cancels, "
              f"{built.releases:,} releases, {built.cycles:,} cycle records", flush=True)
    since, until, jobs = stored_window(url)
    with tempfile.TemporaryDirectory() as folder:
        figures = measure_fresh(url, since, until, DEFAULT_PERIOD_S, str(Path(folder) / "trace.csv"))
        cli = None if args.no_cli else cli_times(url, since, until, str(Path(folder) / "cli.csv"))
    total = figures["history_s"] + figures["calibrate_s"]
    print(f"store: {_redacted(url)} ({jobs:,} jobs; window {since} – {until})")
    print(f"history: {figures['history_s']:.1f} s (read {figures['history_read_s']:.1f}, CSV {figures['history_csv_s']:.1f}); "
          f"{figures['rows']:,} rows, {figures['censored']:,} censored, {figures['never_started']:,} never started")
    print(f"calibrate: {figures['calibrate_s']:.1f} s (site + history at the last cycle {figures['calibrate_read_s']:.1f}, "
          f"replay {figures['replay_s']:.1f}); {figures['replayed']:,} replayed on {figures['cluster_nodes']} nodes / "
          f"{figures['cluster_gpus']} GPUs; {figures['verdict']}")
    print(f"functions: history + calibrate {total:.1f} s, peak RSS {figures['rss_peak_mib']:.0f} MiB")
    verdict_total = total
    if cli is not None:
        h, c = cli["history"], cli["calibrate"]
        for name, run in cli.items():
            if run["rc"] != 0:
                print(f"CLI {name} failed (rc {run['rc']}): {run['stderr_tail']}")
        verdict_total = h["wall_s"] + c["wall_s"]
        print(f"CLI end to end: plan history {h['wall_s']:.1f} s, plan calibrate {c['wall_s']:.1f} s, "
              f"together {verdict_total:.1f} s (peak RSS {h['rss_peak_mib']:.0f} / {c['rss_peak_mib']:.0f} MiB)")
    passed = verdict_total <= TARGET_S and (cli is None or all(run["rc"] == 0 for run in cli.values()))
    print(f"{'PASS' if passed else 'FAIL'}: {verdict_total:.1f} s against {TARGET_S:.0f} s "
          f"({'CLI' if cli is not None else 'functions'})")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "store": _redacted(url), "jobs": jobs, "since": since, "until": until,
            "built": asdict(built) if built else None, "figures": figures, "cli": cli,
            "total_s": verdict_total, "target_s": TARGET_S, "passed": passed,
            "load": os.getloadavg(), "cpus": os.cpu_count(),
        }, indent=1))
    return 0 if passed else 1


def _redacted(url: str) -> str:
    """_redacted hides a URL's password."""
    from meta.store.db import redact

    return redact(url)


if __name__ == "__main__":
    sys.exit(main())

"""Test-only histories for ``plan what-if`` and ``plan need``: congested rows, and a SQLite store that recorded them.

The congested history: two tenants alternate node-sized jobs (8 a100 GPUs for ``DURATION_S``) every
``GAP_S`` on two 8-GPU nodes, twice as fast as the nodes drain them, so queue delays grow job after
job; what the store records is that queue served first come, first served on the two nodes.
"""

from __future__ import annotations

import gc
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.model.states import AttemptState
from meta.plan.history import HistoryExport, HistoryRow
from meta.plan.scenario import Inputs
from meta.service.api import Service
from meta.sim.cluster import ClusterSpec, NodeGroup
from meta.store.inventory import save_inventory
from meta.store.lifecycle import attempt_event, create_attempt
from tenants.auth import Identity
from tenants.identity import InvalidAccount, Principal, member
from tests.conftest import sqlite_database
from tests.runtime.support import share, submit, training

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
GAP_S, DURATION_S, NODES = 250.0, 1000.0, 2
TENANTS = ("acme", "beta")
NODE_RESOURCES = {"cpus": 8, "memory": "32G", "gpus": 8, "gpu_type": "a100"}
CLOCKED = ("meta.service.api", "meta.store.lifecycle", "meta.store.transitions", "meta.store.audit")
LAUNCH, RUN, OK = AttemptState.LAUNCHING, AttemptState.RUNNING, AttemptState.SUCCEEDED


def row(job_id: str, submit: float, tenant: str = "acme", duration: float = DURATION_S, gpus: int = 8,
        gpu_type: str | None = "a100", queue: float = 0.0, **changes: Any) -> HistoryRow:
    """row is one single-worker task of ``gpus`` GPUs of ``gpu_type``."""
    base = HistoryRow(
        job_id=job_id, submit_time=submit, duration_s=duration, num_gpus=gpus, gpu_type=gpu_type, num_cpus=8.0,
        memory_mib=32768, tenant=tenant, job_kind="training", workers=1, gpus_per_worker=gpus, attempts=1,
        outcome="succeeded", censored=False, queue_delay_s=queue, time_limit_s=2 * duration, user="u", name=job_id,
    )
    return replace(base, **changes)


def fifo_starts(submits: list[float], nodes: int = NODES, duration: float = DURATION_S) -> list[float]:
    """fifo_starts is when each job (in submit order) starts on ``nodes`` nodes served first come, first served."""
    free = [0.0] * nodes
    starts = []
    for at in submits:
        node = min(range(nodes), key=lambda i: free[i])
        start = max(at, free[node])
        free[node] = start + duration
        starts.append(start)
    return starts


def congested_rows(jobs: int = 24, launch_s: float = 0.0) -> list[HistoryRow]:
    """congested_rows is the module's history as rows, recorded delays first come, first served.

    With ``launch_s``, each job holds its node from its decision and starts ``launch_s`` later (Slurm's
    launch): the recorded delay runs to that start.
    """
    submits = [i * GAP_S for i in range(jobs)]
    decisions = fifo_starts(submits, duration=DURATION_S + launch_s)
    return [row(f"j{i:03d}", at, TENANTS[i % 2], queue=decided + launch_s - at)
            for i, (at, decided) in enumerate(zip(submits, decisions, strict=True))]


def export(rows: list[HistoryRow], days: float = 1.0) -> HistoryExport:
    """export is a window of ``days`` from T0 holding ``rows``."""
    ordered = sorted(rows, key=lambda r: (r.submit_time, r.job_id))
    found = HistoryExport(T0, T0 + timedelta(days=days), T0 + timedelta(days=days), rows=ordered)
    found.jobs = len(rows)
    return found


def site_cluster(nodes: int = NODES) -> ClusterSpec:
    """site_cluster is ``nodes`` a100 nodes of 8 GPUs under one leaf switch and a spine."""
    group = NodeGroup(name="a100", count=nodes, gpus=8, gpu_type="a100", cpus=32, memory=256000, switch="leaf1",
                      partitions=["gpu"])
    return ClusterSpec(name="site", node_groups=[group], switch_parent={"leaf1": "spine"})


def inputs(rows: list[HistoryRow], config: Any = None, days: float = 1.0) -> Inputs:
    """inputs is the rows on the site's cluster with equal weights."""
    return Inputs(rows, site_cluster(), {tenant: 1.0 for tenant in TENANTS}, config, days * 86400.0)


def congested_store(path: Path, base: datetime, jobs: int = 24, drained: int = 0, launch_s: float = 0.0) -> str:
    """congested_store writes the congested history into a SQLite store, jobs from ``base``; returns its URL.

    The stored inventory is the two nodes; each job's attempt is created and launched at its decision,
    runs from ``launch_s`` later (0: at once) and ends ``DURATION_S`` after that, so ``plan history``
    reads back the rows of ``congested_rows(jobs, launch_s)``. ``drained`` more a100 nodes are in the
    inventory, drained (none of the history ran on them).
    """
    now = [base]
    with pytest.MonkeyPatch.context() as patch:
        for module in CLOCKED:
            patch.setattr(f"{module}.utcnow", lambda: now[0])
        db = sqlite_database(path)
        service = Service(db)
        nodes = [NodeState(name=f"a{i}", capacity=ResourceVector(cpus=32, memory_mib=256000, gpus=8, gpu_type="a100"),
                           partitions=("gpu",), switch="leaf1", drained=i >= NODES) for i in range(NODES + drained)]
        with db.session() as session:
            save_inventory(session, nodes, 1, {"leaf1": "spine"})
        for i, history in enumerate(congested_rows(jobs, launch_s)):
            now[0] = base + timedelta(seconds=history.submit_time)
            _, (task,) = submit(service, training(history.job_id, history.tenant, resources=NODE_RESOURCES,
                                                  time_limit="1h"))
            start = history.submit_time + history.queue_delay_s
            decided = start - launch_s
            path_ = [(LAUNCH, decided), (RUN, start), (OK, start + DURATION_S)]
            with db.session() as session:
                now[0] = base + timedelta(seconds=decided)
                attempt_id = create_attempt(session, task, f"t:{task}", placement=[share(f"a{i % NODES}", gpus=8)]).id
            for step, (state, at) in enumerate(path_):
                with db.session() as session:
                    now[0] = base + timedelta(seconds=at)
                    attempt_event(session, attempt_id, state, f"t:{attempt_id}:{step}", actor="test")
        db.dispose()
    return f"sqlite:///{path}"


def run(db_url: str | None, *args: str) -> Result:
    """run invokes ``metasched`` on the store and checks it never shows a traceback."""
    env = {"METASCHED_DB": db_url, "METASCHED_DB_FILE": None, "METASCHED_DEBUG": None}
    result = CliRunner().invoke(cli, list(args), env=env, prog_name="metasched")
    gc.collect()  # close the command's engine now
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def assert_usage_error(result: Result, message: str) -> None:
    """assert_usage_error: the command exited 2 with one ``metasched: error:`` line naming ``message``, nothing on stdout."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("metasched: error: ") and message in lines[0], result.stderr
    assert result.stdout == ""


def saved_reports(url: str) -> dict[str, int]:
    """saved_reports saves a what-if (one added node), a calibration and a need search of the store; their ids by kind."""
    saves = {
        "what-if": ("what-if", "--since", "14d", "--add-nodes", "a100:8x1", "--save", "one more node", "--json"),
        "calibrate": ("calibrate", "--since", "14d", "--save"),
        "need": ("need", "--since", "14d", "--p95", "acme<=10m", "--p95", "beta<=10m", "--node-type", "a100:8",
                 "--save"),
    }
    ids = {}
    for kind, args in saves.items():
        result = run(url, "plan", *args)
        assert result.exit_code == 0, result.output
        ids[kind] = int(result.stderr.split("saved as plan report ", 1)[1].split(" ", 1)[0])
    return ids


# the callers of the saved reports' tests: uid -> (user, tenants it is a member of, the ones it coordinates); 0: admin
CALLERS = {1001: ("alice", ["acme"], []), 1002: ("bob", ["beta"], ["beta"]), 1003: ("carol", ["acme"], ["acme"])}
ADMIN, MEMBER, BETA_COORD, ACME_COORD = 0, 1001, 1002, 1003


def planners(identity: Identity, asked: str | None) -> Principal:
    """planners resolves the API's callers: root is an admin; the others are members (and coordinators) as CALLERS says."""
    if identity.uid == 0:
        return Principal("root", asked, uid=0, gid=0, accounts=frozenset(), admin=True)
    name, accounts, coordinates = CALLERS[identity.uid]
    if asked not in (None, *accounts):
        raise InvalidAccount(asked)
    return member(name, identity.uid, accounts, coordinates=coordinates, tenant=asked)

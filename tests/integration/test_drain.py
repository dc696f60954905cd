"""A drained node takes no new work; once resumed, it does — on the real dev cluster.

t4n2 is drained in Slurm; six 1-T4 jobs arrive. t4n1 (4 T4s) takes four, the other two wait
with a typed reason and never land on t4n2. Then t4n2 is resumed while t4n1 is still full, so
the only free T4s are on t4n2: the two waiting jobs must go there. The node is always resumed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from meta.model.states import AttemptState
from meta.store.models import TaskReason
from slurm_bridge.tags import tag_key
from tests.harness import DaemonHarness, attempts_of, invariant_violations

pytestmark = pytest.mark.slurm

DRAINED = "t4n2"
T4_JOB = {
    "kind": "evaluation",
    "name": "t4-eval",
    "tenant": "tenant-a",
    "resources": {"cpus": 1, "memory": "1G", "gpus": 1, "gpu_type": "t4"},
    "time_limit": "5m",
    "command": "sleep 300",
}


def _scontrol_node(state: str, check: bool = True) -> None:
    args = ["scontrol", "update", f"nodename={DRAINED}", f"state={state}"]
    if state == "drain":
        args.append("reason=metasched-test")
    subprocess.run(args, check=check, capture_output=True, timeout=30)


def _slurm_node_state() -> str:
    out = subprocess.run(
        ["sinfo", "-h", "-n", DRAINED, "-p", "gpu", "-o", "%T"], capture_output=True, text=True, timeout=30
    )
    return out.stdout.strip()


def _slurm_nodes_of(names: set[str]) -> dict[str, str]:
    """_slurm_nodes_of maps active jobs (by key, ``ms-<attempt>``) to the node list Slurm gave them."""
    out = subprocess.run(
        ["squeue", "-h", "-o", "%N|%T|%k|%j"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    found = {}
    for line in out.splitlines():
        nodes, state, comment, name = line.split("|", 3)
        key = tag_key(name, comment)  # ms-<attempt> from a metasched job's comment
        if key in names and state == "RUNNING":
            found[key] = nodes
    return found


@pytest.fixture
def drained(harness: DaemonHarness) -> Iterator[DaemonHarness]:
    """drained drains t4n2 for the test and always resumes it."""
    try:
        _scontrol_node("drain")
        assert _slurm_node_state() in ("drained", "draining"), _slurm_node_state()
        yield harness
    finally:
        if _slurm_node_state() in ("drained", "draining"):
            _scontrol_node("resume", check=False)


def test_drained_node_gets_nothing_until_resumed(drained: DaemonHarness) -> None:
    h = drained
    jobs = [h.submit(dict(T4_JOB, name=f"t4-{i}")) for i in range(6)]
    on_drained: list[str] = []

    def watch() -> None:
        for job in jobs:
            for a in attempts_of(h.service, job):
                if DRAINED in a.nodes:
                    on_drained.append(f"{job}: attempt {a.id} on {a.nodes}")

    def live(job: str) -> list:
        return [a for a in attempts_of(h.service, job) if a.state not in ("succeeded", "failed", "cancelled")]

    def running(job: str) -> bool:
        return any(a.state == AttemptState.RUNNING for a in attempts_of(h.service, job))

    def two_waiting_with_reason() -> bool:
        placed = [job for job in jobs if live(job)]
        waiting = [job for job in jobs if not live(job)]
        if len(placed) != 4 or not all(running(job) for job in placed) or len(waiting) != 2:
            return False
        task_ids = {t.id for job in waiting for t in h.service.status(job).tasks}
        with h.service.db.session() as session:
            reasons = list(session.scalars(select(TaskReason).where(TaskReason.task_id.in_(task_ids))))
        return len(reasons) == 2

    h.run_until(two_waiting_with_reason, timeout_s=90, between=watch)
    first = [job for job in jobs if live(job)]
    waiting = [job for job in jobs if job not in first]
    first_attempts = [live(job)[0] for job in first]
    with h.service.db.session() as session:
        reasons = {
            r.code: r.message
            for r in session.scalars(
                select(TaskReason).where(
                    TaskReason.task_id.in_({t.id for job in waiting for t in h.service.status(job).tasks})
                )
            )
        }
    slurm_first = _slurm_nodes_of({f"ms-{a.id}" for a in first_attempts})
    print(f"\ndrain: while {DRAINED} drained: 4 on {sorted({n for a in first_attempts for n in a.nodes})}, ")
    print(f"  Slurm nodes {sorted(set(slurm_first.values()))}; 2 waiting with {reasons}")
    assert on_drained == []
    assert all(a.nodes == ["t4n1"] for a in first_attempts)
    assert set(slurm_first.values()) == {"t4n1"} and len(slurm_first) == 4
    assert invariant_violations(h.service) == []

    _scontrol_node("resume")
    assert _slurm_node_state() not in ("drained", "draining")
    h.run_until(lambda: all(running(job) for job in waiting), timeout_s=90)
    second = [live(job)[0] for job in waiting]
    slurm_second = _slurm_nodes_of({f"ms-{a.id}" for a in second})
    print(f"  after resume: the 2 waiting jobs run on {sorted({n for a in second for n in a.nodes})}")
    assert all(a.nodes == [DRAINED] for a in second)
    assert set(slurm_second.values()) == {DRAINED} and len(slurm_second) == 2
    assert all(a.nodes == ["t4n1"] for a in (live(job)[0] for job in first))  # the first four never moved
    assert invariant_violations(h.service) == []

    for job in jobs:
        h.service.cancel(job)
    h.run_until(lambda: not any(live(job) for job in jobs), timeout_s=60)

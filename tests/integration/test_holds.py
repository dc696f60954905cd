"""A head-of-line gang that must wait gets a Slurm reservation on its planned nodes, which is
deleted when the gang starts; `explain` tells the gang and the blocked jobs why they wait."""

from __future__ import annotations

import subprocess

import pytest
from sqlalchemy import select

from meta.model.states import JobState
from meta.store.models import Task, TaskReason
from slurm_bridge.reservations import HOLD_PREFIX
from tests.harness import DaemonHarness

pytestmark = pytest.mark.slurm


def _holds() -> dict[str, str]:
    out = subprocess.run(
        ["scontrol", "-o", "show", "reservation"], capture_output=True, text=True, timeout=30
    ).stdout
    holds = {}
    for line in out.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        name = fields.get("ReservationName", "")
        if name.startswith(HOLD_PREFIX):
            holds[name] = fields.get("Nodes", "")
    return holds


def _reason(h: DaemonHarness, job: str) -> str | None:
    job_id = h.service.status(job).summary.id
    with h.service.db.session() as session:
        return session.scalar(
            select(TaskReason.code).join(Task, Task.id == TaskReason.task_id).where(Task.job_id == job_id)
        )


def test_waiting_gang_holds_nodes_in_slurm_until_it_starts(harness: DaemonHarness) -> None:
    blocker = harness.submit(
        {
            "kind": "evaluation",
            "name": "blocker",
            "tenant": "tenant-b",
            "resources": {"cpus": 1, "memory": "1G", "gpus": 8, "gpu_type": "a100"},
            "time_limit": "10m",
            "preemptible": False,  # else the higher-class gang would evict it instead of waiting
            "command": "sleep 600",
        }
    )
    harness.run_until(lambda: harness.state(blocker) == JobState.RUNNING, 60)
    gang = harness.submit(
        {
            "kind": "training",
            "name": "gang",
            "tenant": "tenant-a",
            "workers": 2,
            "resources": {"cpus": 1, "memory": "1G", "gpus": 8, "gpu_type": "a100"},
            "time_limit": "5m",
            "command": "sleep 1",
        }
    )
    harness.run_until(lambda: bool(_holds()), 30)
    holds = _holds()
    print(f"\nholds while the gang waits: {holds}")
    assert list(holds.values()) == ["a100n[1-2]"]
    assert _reason(harness, gang) == "HeldForGang"

    harness.service.cancel(blocker)
    harness.run_until(lambda: harness.state(gang) == JobState.SUCCEEDED, 120)
    assert _holds() == {}

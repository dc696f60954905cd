"""On the real dev cluster: two gangs want both A100 nodes; the later, shorter one runs first, and the
loser's ``explain --history`` names it and why, while another tenant's member cannot ask."""

from __future__ import annotations

import pytest

from meta.model.errors import NotFound
from meta.model.states import JobState
from meta.service.operations import Operations
from tenants.identity import member
from tests.harness import DaemonHarness

pytestmark = pytest.mark.slurm


def _gang(name: str, tenant: str, time_limit: str, command: str) -> dict[str, object]:
    return {"kind": "training", "name": name, "tenant": tenant, "workers": 2, "time_limit": time_limit,
            "resources": {"cpus": 1, "memory": "1G", "gpus": 8, "gpu_type": "a100"}, "command": command}  # fmt: skip


def test_losers_history_on_the_real_cluster(harness: DaemonHarness) -> None:
    loser = harness.submit(_gang("long-gang", "tenant-a", "2h", "sleep 1"))
    winner = harness.submit(_gang("short-gang", "tenant-b", "10m", "sleep 5"))
    harness.run_until(lambda: harness.state(winner) in (JobState.RUNNING, JobState.SUCCEEDED), 90)
    assert harness.state(loser) == JobState.PENDING
    alice = Operations(harness.service, member("alice", 2001, ["tenant-a"]))
    history = alice.explain_history(loser)
    print(f"\n{history}")
    ran = [r for r in history["ran_before"] if r["job"] == winner]
    assert ran and ran[0]["tenant"] == "tenant-b" and ran[0]["your_key_source"] == "recorded"
    assert ran[0]["why"].startswith("earlier in line by 18.3 h: submit time + 10 x runtime")
    bob = Operations(harness.service, member("bob", 2002, ["tenant-b"]))
    with pytest.raises(NotFound):
        bob.explain_history(loser)
    harness.run_until(harness.all_finished([winner, loser]), 180)
    after = alice.explain_history(loser)
    assert not after["waiting"] and [t["what"] for t in after["touching"] if t["decision"] == "place"] == ["placed"]

"""``explain --history``: two jobs compete under a real daemon period (fake Slurm, real store); the loser's history names the winner and why."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from fastapi.testclient import TestClient

from cli.main import cli
from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.policy.config import SchedulerConfig
from meta.service.api import Service
from meta.service.http import create_app
from meta.store.models import Job, Task
from slurm_bridge.fake import FakeSlurm, sinfo_node
from tests.api_support import ALICE, BOB, ROOT, TestAuthenticator, principal_for
from tests.conftest import sqlite_database
from tests.runtime.support import checkpointing, settled, submit, training

SECRET_NAME = "bobs-private-model-name"


@pytest.fixture
def api(service: Service, tmp_path: Path) -> Iterator[TestClient]:
    """api is a TestClient over the app on an empty store (SQLite and PostgreSQL)."""
    with TestClient(create_app(service, TestAuthenticator(), principal_for, secrets_root=tmp_path / "s")) as client:
        yield client


def _compete(service: Service, tmp_path: Path) -> tuple[str, str]:
    """_compete submits alice's 2 h job, then bob's 30 min one, for one 2-GPU node; one period: bob's runs.

    The "turns" order merges tenants by submit time + 10 x runtime, so the later, shorter job goes
    first (the shipped multifactor order would give the place to alice's older job, as Slurm does).
    """
    loser, _ = submit(service, training("alices-job", tenant="tenant-a", time_limit="2h"))
    winner, _ = submit(service, training(SECRET_NAME, tenant="tenant-b", time_limit="30m"))
    config = DaemonConfig(period_s=0.0, leader_lease_s=60.0, holder="history", submit_timeout_s=0.0,
                          launch=LaunchSettings(log_dir=str(tmp_path / "logs")),
                          scheduler=SchedulerConfig(tenant_order="turns", hold_min_gpus=8))  # fmt: skip
    daemon = Daemon(service.db, FakeSlurm([sinfo_node("node1", gpus=2)]), config)
    assert daemon.period().placed == 1
    daemon.period()  # a second cycle: the loser waits again, the winner is no longer pending
    return _short(service, winner), _short(service, loser)


def _short(service: Service, job_id: str) -> str:
    with service.db.session() as session:
        return session.get(Job, job_id).short_id


def _get(api: TestClient, path: str, who: str) -> Any:
    return api.get(path, headers={"Authorization": who})


def test_losers_history_names_the_winner_and_why(api: TestClient, service: Service, tmp_path: Path) -> None:
    winner, loser = _compete(service, tmp_path)
    response = _get(api, f"/v1/jobs/{loser}/explain/history", ALICE)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["job"] == loser and body["waiting"] and body["placed_while_waiting"] == 1
    (ran,) = body["ran_before"]
    assert (ran["job"], ran["tenant"], ran["your_key_source"], ran["backfilled"]) == (winner, "tenant-b", "recorded",
                                                                                       False)
    assert ran["why"].startswith("earlier in line by 15.0 h: submit time + 10 x runtime")  # 10 x 1.5 h shorter
    assert ran["key"]["submit_key"] + 15 * 3600 - 1 < ran["your_key"]["submit_key"]
    assert ran["key"]["class"] == ran["your_key"]["class"] == "training"
    # other tenants' jobs are named as explain names them: short id and tenant, nothing else
    with service.db.session() as session:
        hidden = [session.get(Job, j).id for j in session.scalars(Job.__table__.select().with_only_columns(Job.id))]
        hidden += list(session.scalars(Task.__table__.select().with_only_columns(Task.id)))
    text = json.dumps(body)
    assert SECRET_NAME not in text and not any(h in text for h in hidden)


def test_winners_history_and_tenant_isolation(api: TestClient, service: Service, tmp_path: Path) -> None:
    winner, loser = _compete(service, tmp_path)
    assert _get(api, f"/v1/jobs/{loser}/explain/history", BOB).status_code == 404  # not bob's tenant
    assert _get(api, f"/v1/jobs/{winner}/explain/history", ALICE).status_code == 404
    body = _get(api, f"/v1/jobs/{winner}/explain/history", BOB).json()
    assert body["ran_before"] == [] and not body["waiting"]
    (placed,) = [t for t in body["touching"] if t["decision"] == "place"]
    assert placed["what"] == "placed" and placed["detail"]["nodes"] == ["node1"]
    admin = _get(api, f"/v1/jobs/{loser}/explain/history?limit=1", ROOT).json()
    assert [r["job"] for r in admin["ran_before"]] == [winner]


def test_cli_history_in_local_mode(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    service = Service(sqlite_database(store))
    winner, loser = _compete(service, tmp_path)
    service.db.dispose()
    env = {"METASCHED_DB": f"sqlite:///{store}", "METASCHED_TENANT": None, "METASCHED_DEBUG": None}
    result = CliRunner().invoke(cli, ["explain", loser, "--history"], env=env, prog_name="metasched")
    assert result.exit_code == 0, result.output
    assert "WHY IT WENT FIRST" in result.stdout and winner in result.stdout and "earlier in line by" in result.stdout
    result = CliRunner().invoke(cli, ["explain", loser, "--history", "--json"], env=env, prog_name="metasched")
    assert json.loads(result.stdout)["ran_before"][0]["job"] == winner


def test_preemption_is_on_both_jobs_records(api: TestClient, service: Service, tmp_path: Path) -> None:
    node = {"cpus": 8, "memory": "32G", "gpus": 8, "gpu_type": "a100"}
    fake = FakeSlurm([sinfo_node("node1", gpus=8)])
    fake.run_ticks = 1000  # the victim never ends on its own
    config = DaemonConfig(period_s=0.0, leader_lease_s=60.0, holder="history", submit_timeout_s=0.0,
                          launch=LaunchSettings(log_dir=str(tmp_path / "logs"), grace_s=30))  # fmt: skip
    daemon = Daemon(service.db, fake, config)
    low, _ = submit(service, checkpointing("low", tenant="tenant-b", ckpt_dir=str(tmp_path / "c"), resources=node,
                                           priority_class="evaluation"))  # fmt: skip
    for _ in range(3):
        assert settled(daemon).error == ""
        fake.advance()
    high, _ = submit(service, training("high", tenant="tenant-a", resources=node))
    assert settled(daemon).preempting == 1
    victim = _get(api, f"/v1/jobs/{_short(service, low)}/explain/history", BOB).json()
    (hit,) = [t for t in victim["touching"] if t["decision"] == "preempt"]
    assert hit["what"].startswith("preempted") and hit["other"] == {"job": _short(service, high), "tenant": "tenant-a"}
    assert hit["detail"]["lost_gpu_seconds"] >= 0 and hit["reason"]
    winner = _get(api, f"/v1/jobs/{_short(service, high)}/explain/history", ALICE).json()
    (done,) = [t for t in winner["touching"] if t["decision"] == "preempt"]
    assert done["what"] == "a job was preempted for it" and done["other"] == {"job": _short(service, low),
                                                                             "tenant": "tenant-b"}
    assert done["key"]["class"] == "training"


def test_a_job_not_listed_gets_its_key_rebuilt(api: TestClient, service: Service, tmp_path: Path) -> None:
    # four of alice's 2 h jobs, then bob's 30 min one: the decision lists only the next in line, so
    # alice's last job's key in that cycle is rebuilt from the cycle's context
    alices = [submit(service, training(f"a{i}", tenant="tenant-a", time_limit="2h"))[0] for i in range(4)]
    winner, _ = submit(service, training("b", tenant="tenant-b", time_limit="30m"))
    config = DaemonConfig(period_s=0.0, leader_lease_s=60.0, holder="history", submit_timeout_s=0.0,
                          launch=LaunchSettings(log_dir=str(tmp_path / "logs")),
                          scheduler=SchedulerConfig(tenant_order="turns", hold_min_gpus=8))  # fmt: skip
    daemon = Daemon(service.db, FakeSlurm([sinfo_node("node1", gpus=2)]), config)
    assert daemon.period().placed == 1
    body = _get(api, f"/v1/jobs/{_short(service, alices[-1])}/explain/history", ALICE).json()
    (ran,) = body["ran_before"]
    assert ran["job"] == _short(service, winner) and ran["your_key_source"] == "rebuilt"
    assert ran["why"].startswith("earlier in line by 15.0 h") and ran["your_key"]["class"] == "training"
    listed = _get(api, f"/v1/jobs/{_short(service, alices[0])}/explain/history", ALICE).json()
    assert listed["ran_before"][0]["your_key_source"] == "recorded"


def test_backfill_past_a_held_job_says_what_the_hold_allowed() -> None:
    """Issue 21: a job placed past a held gang is never said to have used capacity the gang could have had."""
    from meta.service.decision_history import backfilled_past

    hold = {"nodes": ["node1", "node2"], "planned_start": 1_800_000_000.0}  # 08:00:00 UTC
    on_held = backfilled_past(["node1"], hold)
    assert "could not start before 08:00:00 UTC" in on_held and "ends before then" in on_held
    assert "other nodes" in backfilled_past(["node3"], hold)
    unheld = backfilled_past(["node1"], None)
    assert "no nodes were held" in unheld and "capacity the winner used" not in unheld

"""Per-tenant submit limits (issue 16): pending jobs per tenant and per user, the submit-rate bucket.

The service with a ``SubmitGate`` on SQLite and PostgreSQL, a hand-driven clock: refusals in
sbatch's words, the other tenants untouched, limits from Slurm's associations winning over
metasched's settings, refusals audited once per interval with the count in between.
"""

from __future__ import annotations

import math

import pytest

from meta.policy.admission import POLICY_VIOLATION, SubmitLimits, TokenBucket, pending_refusal
from meta.service.api import Service
from meta.service.submit_gate import SubmitGate, SubmitLimitExceeded, SubmitRateLimited
from meta.store import audit
from meta.store.tenant_shares import SlurmShares, apply_slurm_shares
from tenants.identity import member
from tenants.quotas import SlurmOwnedSetting, admin_set_tenant, set_tenant
from tests.runtime.support import evaluation

ALICE = member("alice", 2001, ["tenant-a"])
CAROL = member("carol", 2003, ["tenant-a", "tenant-b"])
BOB = member("bob", 2002, ["tenant-b"])
OSCAR = member("oscar", 2005, ["research"], admin=True)


class Clock:
    """Clock is a monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def gated(service: Service, clock: Clock) -> Service:
    refused: list[tuple[str, str]] = []
    service.gate = SubmitGate(service.db, rate=1_000.0, burst=1_000, clock=clock,
                              on_refusal=lambda tenant, reason: refused.append((tenant, reason)))  # fmt: skip
    service.refused = refused  # type: ignore[attr-defined]
    return service


def _limit(service: Service, tenant: str, clock: Clock, **submit: float | None) -> None:
    with service.db.session() as session:
        set_tenant(session, tenant, actor="test", submit=submit)
    clock.now += 10  # past the gate's limits refresh


def _jobs(tenant: str, count: int) -> list:
    return [evaluation(f"e{i}", tenant=tenant) for i in range(count)]


def test_a_tenant_at_its_pending_limit_is_refused_in_sbatchs_words_and_others_go_on(gated: Service, clock: Clock) -> None:
    _limit(gated, "tenant-a", clock, max_pending=3)
    gated.submit_many(_jobs("tenant-a", 2), principal=ALICE)
    gated.submit(evaluation(tenant="tenant-a"), principal=CAROL)
    with pytest.raises(SubmitLimitExceeded) as refused:
        gated.submit(evaluation(tenant="tenant-a"), principal=ALICE)
    message = str(refused.value)
    assert message.startswith(POLICY_VIOLATION) and "AssocGrpSubmitJobsLimit" in message
    assert "tenant tenant-a has 3 pending or running tasks of 3" in message and "metasched tenant setting" in message
    gated.submit_many(_jobs("tenant-b", 5), principal=BOB)  # another tenant is not touched
    assert len(gated.list_jobs(tenant="tenant-a")) == 3  # nothing stored by the refusal
    assert gated.refused == [("tenant-a", "tenant_pending")]  # type: ignore[attr-defined]


def test_counts_are_read_again_after_jobs_end(gated: Service, clock: Clock) -> None:
    _limit(gated, "tenant-a", clock, max_pending=2)
    first = gated.submit_many(_jobs("tenant-a", 2), principal=ALICE)
    with pytest.raises(SubmitLimitExceeded):
        gated.submit(evaluation(tenant="tenant-a"), principal=ALICE)
    gated.cancel(first[0].job.id)
    with pytest.raises(SubmitLimitExceeded):  # the count read before the cancel is still current
        gated.submit(evaluation(tenant="tenant-a"), principal=ALICE)
    clock.now += 1.5
    gated.submit(evaluation(tenant="tenant-a"), principal=ALICE)
    assert gated.gate.pending("tenant-a") == 2  # type: ignore[union-attr]


def test_a_batch_is_all_or_nothing_against_the_limit(gated: Service, clock: Clock) -> None:
    _limit(gated, "tenant-a", clock, max_pending=5)
    gated.submit_many(_jobs("tenant-a", 3), principal=ALICE)
    with pytest.raises(SubmitLimitExceeded, match="this submit adds 3"):
        gated.submit_many(_jobs("tenant-a", 3), principal=ALICE)
    gated.submit_many(_jobs("tenant-a", 2), principal=ALICE)
    assert gated.gate.pending("tenant-a") == 5  # type: ignore[union-attr]


def test_slurms_max_submit_jobs_limits_each_user_and_wins_over_metasched(gated: Service, clock: Clock) -> None:
    _limit(gated, "tenant-a", clock, max_pending_per_user=5)
    with gated.db.session() as session:
        apply_slurm_shares(session, [SlurmShares("tenant-a", 70.0, {}, max_pending=None, max_pending_per_user=None,
                                                 user_max_pending={"alice": 1})])  # fmt: skip
    clock.now += 10
    gated.submit(evaluation(tenant="tenant-a"), principal=ALICE)
    with pytest.raises(SubmitLimitExceeded) as refused:
        gated.submit(evaluation(tenant="tenant-a"), principal=ALICE)
    assert "AssocMaxSubmitJobLimit, user alice has 1 pending or running tasks in tenant-a of 1 (MaxSubmitJobs, Slurm)" in str(
        refused.value
    )
    gated.submit_many(_jobs("tenant-a", 5), principal=CAROL)  # carol: metasched's 5 per user
    with pytest.raises(SubmitLimitExceeded, match="AssocMaxSubmitJobLimit, user carol"):
        gated.submit(evaluation(tenant="tenant-a"), principal=CAROL)


def test_a_limit_slurm_sets_is_refused_in_metasched_with_the_sacctmgr_command(service: Service) -> None:
    with service.db.session() as session:
        apply_slurm_shares(session, [SlurmShares("research", 1.0, {}, max_pending=500)])
    with service.db.session() as session, pytest.raises(SlurmOwnedSetting) as refused:
        admin_set_tenant(session, OSCAR, "research", submit={"max_pending": 100})
    assert "sacctmgr modify account where name=research set GrpSubmitJobs=100" in str(refused.value)
    with service.db.session() as session:
        view = admin_set_tenant(session, OSCAR, "research", submit={"rate": 5.0, "burst": 50})  # never Slurm's
    assert view.submit_limits == {"max_pending": 500, "rate": 5.0, "burst": 50, "sources": {"max_pending": "slurm"}}
    with service.db.session() as session:  # Slurm drops GrpSubmitJobs: no tenant-wide limit any more
        apply_slurm_shares(session, [SlurmShares("research", 1.0, {})])
        view = admin_set_tenant(session, OSCAR, "research", submit={"max_pending": 100})
    assert view.submit_limits == {"max_pending": 100, "rate": 5.0, "burst": 50, "sources": {"max_pending": "metasched"}}


@pytest.mark.parametrize("bad", [{"max_pending": -2}, {"max_pending": 1.5}, {"rate": 0}, {"burst": 0}, {"nosuch": 1}])
def test_bad_submit_settings_are_refused(service: Service, bad: dict) -> None:
    with service.db.session() as session, pytest.raises(Exception, match="submit limit|whole number|rate"):
        admin_set_tenant(session, OSCAR, "research", submit=bad)


def test_the_rate_bucket_refuses_with_the_wait_and_refills(gated: Service, clock: Clock) -> None:
    _limit(gated, "research", clock, rate=10.0, burst=5)
    gated.submit_many(_jobs("research", 5), principal=OSCAR)
    with pytest.raises(SubmitRateLimited) as refused:
        gated.submit(evaluation(tenant="research"), principal=OSCAR)
    assert refused.value.refusal.retry_after_s == pytest.approx(0.1)
    assert "rate limit (10 tasks/s, bursts of 5) is reached; retry in 0.1 s" in str(refused.value)
    gated.submit_many(_jobs("tenant-a", 20), principal=ALICE)  # tenant-a has a bucket of its own
    clock.now += 0.1
    gated.submit(evaluation(tenant="research"), principal=OSCAR)
    clock.now += 10
    with pytest.raises(SubmitRateLimited, match="never fits; send smaller batches") as never:
        gated.submit_many(_jobs("research", 6), principal=OSCAR)
    assert never.value.refusal.retry_after_s is None


def test_refusals_are_audited_once_per_interval_with_the_count_in_between(gated: Service, clock: Clock) -> None:
    _limit(gated, "research", clock, max_pending=1)
    gated.submit(evaluation(tenant="research"), principal=OSCAR)
    for _ in range(4):
        with pytest.raises(SubmitLimitExceeded):
            gated.submit(evaluation(tenant="research"), principal=OSCAR)
    clock.now += 11
    with pytest.raises(SubmitLimitExceeded):
        gated.submit(evaluation(tenant="research"), principal=OSCAR)
    with gated.db.session() as session:
        lines = [line for line in audit.read(session, tenant="research") if line.action == "job.submit.refused"]
    assert [(line.actor, line.detail["reason"], line.detail["refused_since_last_line"]) for line in lines] == [
        ("oscar", "tenant_pending", 3),
        ("oscar", "tenant_pending", 0),
    ]
    assert lines[0].detail["limit"] == 1 and lines[0].detail["tasks"] == 1
    assert len(gated.refused) == 5  # type: ignore[attr-defined]  # the metric counts every one


def test_an_idempotent_replay_gives_its_reservation_back(gated: Service, clock: Clock) -> None:
    _limit(gated, "research", clock, max_pending=2, rate=1.0, burst=4)
    gated.submit_many(_jobs("research", 2), idempotency_key="k", principal=OSCAR)
    assert gated.gate.pending("research") == 2  # type: ignore[union-attr]
    _limit(gated, "research", clock, max_pending=4)  # room for the replay's check
    replay = gated.submit_many(_jobs("research", 2), idempotency_key="k", principal=OSCAR)
    assert not any(r.created for r in replay)
    assert gated.gate.pending("research") == 2  # type: ignore[union-attr]


def test_token_bucket_and_pending_refusal_are_plain_arithmetic() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, now=0.0)
    assert bucket.take(3, 0.0) == 0.0 and bucket.take(1, 0.0) == pytest.approx(0.5)
    assert bucket.take(1, 0.5) == 0.0 and math.isinf(bucket.wait_for(4, 100.0))
    limits = SubmitLimits(max_pending=10, max_pending_per_user=4, users={"alice": 2})
    assert pending_refusal("t", "bob", limits, 6, 0, 4) is None
    assert pending_refusal("t", "bob", limits, 7, 0, 4).reason == "tenant_pending"  # type: ignore[union-attr]
    assert pending_refusal("t", "bob", limits, 0, 3, 2).reason == "user_pending"  # type: ignore[union-attr]
    assert pending_refusal("t", "alice", limits, 0, 1, 2).limit == 2  # type: ignore[union-attr]

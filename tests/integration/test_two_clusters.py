"""One metasched over two real Slurm clusters (issue 26): emu and dev2 (`deploy/devcluster up --second`).

An in-process daemon whose Slurm is a ``ClusterSet`` over the first cluster (the default
slurm.conf) and dev2 (its own slurm.conf), as ``metasched serve --clusters emu,dev2=...`` builds
it, on a PostgreSQL store. Checked on the real pair:

- whole-node jobs that do not fit one cluster's H100s all start at once, spread over both;
- a 2-node gang lands on one cluster, never across; a 3-node A100 gang (each cluster has two
  A100 nodes) waits as unresolvable, saying no single cluster fits it;
- a job confined with ``clusters: [dev2]`` runs on a dev2 node;
- every attempt's Slurm id names its cluster (``emu/N``, ``dev2/N``), the reconciler follows both
  clusters' jobs to their ends (one attempt each), and a cancel through metasched reaches the
  job on dev2 (sacct -M dev2: CANCELLED);
- usage is global: a tenant that ran on emu's H100s goes behind another for dev2's one free A100
  node, though it asked first (under strict share order);
- explain says why a job went to one cluster and not the other; a tenant confined to dev2 runs there only.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from meta.model.clusters import cluster_of, split_qualified
from meta.model.states import AttemptState, JobState
from meta.policy.plan import ReasonCode
from meta.service.api import Service
from meta.store.models import Tenant, TenantUsage
from tests.harness import DaemonHarness
from tests.integration.second_cluster import SECOND, SECOND_CONF
from tests.integration.two_cluster_support import (
    FIRST,
    WHOLE_A100,
    WHOLE_H100,
    _attempts,
    _nodes,
    _reason,
    _running_in_slurm,
    _slurm_state,
    _spec,
    daemon_over_pair,
)

pytestmark = pytest.mark.slurm


def test_one_metasched_places_on_both_clusters_and_follows_their_jobs(two_clusters: DaemonHarness) -> None:
    h = two_clusters
    wide = [h.submit(_spec(f"h100-{i}", resources=WHOLE_H100, command="sleep 25")) for i in range(4)]
    pair = h.submit(_spec("gang-2", kind="training", workers=2, resources=WHOLE_A100, command="sleep 3"))
    triple = h.submit(_spec("gang-3", kind="training", workers=3, resources=WHOLE_A100, command="sleep 3"))
    pinned = h.submit(_spec("on-dev2", sbatch={"clusters": [SECOND]}, command="sleep 3"))

    # four whole H100 nodes exist only as two per cluster: all four run at once only across both
    h.run_until(lambda: all(h.state(job) == JobState.RUNNING for job in wide), timeout_s=90)
    per_cluster = [cluster_of(node) for job in wide for node in _nodes(h, job)]
    assert sorted(per_cluster) == sorted([FIRST, FIRST, SECOND, SECOND]), per_cluster

    code, message = _reason(h, triple)
    assert code == ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE.value and "no single Slurm cluster fits 3 workers" in message

    victim = wide[0]
    h.service.cancel(victim)
    h.run_until(h.all_finished([*wide, pair, pinned]), timeout_s=180)
    victim_ref = _attempts(h, victim)[0].slurm_job_id or ""  # recorded behind the period: read once it all ended

    assert h.state(victim) == JobState.CANCELLED
    assert all(h.state(job) == JobState.SUCCEEDED for job in [*wide[1:], pair, pinned])
    gang_clusters = {cluster_of(node) for node in _nodes(h, pair)}
    assert len(_nodes(h, pair)) == 2 and len(gang_clusters) == 1, _nodes(h, pair)
    assert {cluster_of(node) for node in _nodes(h, pinned)} == {SECOND}
    for job in [*wide, pair, pinned]:
        attempts = _attempts(h, job)
        assert len(attempts) == 1, (job, attempts)  # followed on its cluster, never relaunched
        cluster, bare = split_qualified(attempts[0].slurm_job_id)
        assert cluster in (FIRST, SECOND) and bare.isdigit(), attempts[0].slurm_job_id
        assert cluster == cluster_of(sorted(_nodes(h, job))[0])  # the id names the cluster it ran on
    cluster, bare = split_qualified(victim_ref)
    assert _attempts(h, victim)[0].state == AttemptState.CANCELLED.value
    assert _slurm_state(cluster, bare).startswith("CANCELLED"), _slurm_state(cluster, bare)
    assert h.state(triple) == JobState.PENDING
    h.service.cancel(triple)


def _clusters_verdicts(h: DaemonHarness, job: str) -> dict[str, tuple[str, str]]:
    """_clusters_verdicts is explain's per-cluster block of the job's first task: cluster -> (verdict, message)."""
    from meta.service.explain import explain_job  # issue 26's per-cluster explain

    status = h.service.status(job)
    with h.service.db.session() as session:
        item = explain_job(session, status.summary.id, job, status.state.value)["tasks"][0]
    return {c["cluster"]: (c["verdict"], c["message"]) for c in item["clusters"]}


def test_explain_says_where_a_job_runs_and_why_not_the_other_cluster(two_clusters: DaemonHarness) -> None:
    h = two_clusters
    pinned = h.submit(_spec("h100-on-dev2", resources=WHOLE_H100, sbatch={"clusters": [SECOND]}, command="sleep 20"))
    triple = h.submit(_spec("gang-3", kind="training", workers=3, resources=WHOLE_A100, command="sleep 3"))
    h.run_until(_running_in_slurm(h, pinned), timeout_s=90)

    placed = _clusters_verdicts(h, pinned)
    assert placed[FIRST] == ("not_listed", f"not in the job's --clusters ({SECOND})")
    assert placed[SECOND][0] == "placed" and placed[SECOND][1].startswith(f"runs here on {SECOND}/b-h100n"), placed
    gang = _clusters_verdicts(h, triple)
    assert {name: verdict for name, (verdict, _) in gang.items()} == {FIRST: "too_few_nodes", SECOND: "too_few_nodes"}
    assert all("fits only 2 of 3 workers" in message for _, message in gang.values()), gang
    h.service.cancel(triple)
    h.service.cancel(pinned)
    h.run_until(h.all_finished([pinned, triple]), timeout_s=90)


def test_a_tenant_confined_to_dev2_lands_only_on_dev2(two_clusters: DaemonHarness) -> None:
    from meta.service.operations import Operations  # issue 26's tenant confinement
    from tenants.identity import ADMIN

    h = two_clusters
    admin = Operations(h.service, ADMIN)
    admin.set_tenant("tenant-a", clusters=[SECOND])
    try:
        # three whole H100 nodes: without the confinement two would start on emu at once
        wide = [h.submit(_spec(f"only-dev2-h100-{i}", resources=WHOLE_H100, command="sleep 4")) for i in range(3)]
        small = [h.submit(_spec(f"only-dev2-{i}", command="sleep 2")) for i in range(2)]
        outside = h.submit(_spec("only-dev2-on-emu", sbatch={"clusters": [FIRST]}))  # stored: no submit check here
        h.run_until(h.all_finished([*wide, *small]), timeout_s=180)
        assert all(h.state(job) == JobState.SUCCEEDED for job in [*wide, *small])
        clusters = {cluster_of(node) for job in [*wide, *small] for node in _nodes(h, job)}
        assert clusters == {SECOND}, clusters
        code, message = _reason(h, outside)
        assert code == ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE.value, (code, message)
        assert message == f"tenant tenant-a may run only on the clusters {SECOND}; the job's --clusters names {FIRST}"
        assert h.state(outside) == JobState.PENDING and not _attempts(h, outside)
        h.service.cancel(outside)
    finally:
        admin.set_tenant("tenant-a", clusters=[])


def _plain_sbatch_on_dev2(node: str, seconds: int) -> str:
    """_plain_sbatch_on_dev2 holds a whole dev2 node with a plain Slurm job (not metasched's); returns its id."""
    args = ["sbatch", "-M", SECOND, "--parsable", "-A", "tenant-a", "-J", "plain-blocker", "-w", node, "--exclusive",
            "-o", "/dev/null", "--wrap", f"sleep {seconds}"]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def test_a_tenant_over_its_share_on_emu_yields_on_dev2(two_clusters: DaemonHarness) -> None:
    """Usage is global: what tenant-a ran on emu puts it behind tenant-b for the one free A100 node of dev2."""
    h = two_clusters
    # strict share order (fair_share_horizon_s: none), a site's setting: with the shipped horizon 0 borrowers go
    # shortest-first and tenant-a's job, asked first, starts first (measured; issue 21 is about that order)
    h.config.scheduler = replace(h.config.scheduler, fair_share_horizon_s=None)
    blocker = _plain_sbatch_on_dev2("b-a100n1", 90)  # dev2 keeps one free A100 node
    try:
        # tenant-a's usage comes from emu's H100s: its A100 limit (16 GPUs, Slurm's GrpTRES) stays clear
        on_emu = [h.submit(_spec(f"emu-h100-{i}", resources=WHOLE_H100, sbatch={"clusters": [FIRST]},
                                 command="sleep 60")) for i in range(2)]  # fmt: skip
        h.run_until(lambda: all(_running_in_slurm(h, job)() for job in on_emu), timeout_s=60)
        h.run_until(lambda: _tenant_usage(h, "tenant-a") > 0, timeout_s=30)
        h.run_until(lambda: _squeue_running(blocker), timeout_s=30)
        # tenant-a asks first, tenant-b a moment later; both only for dev2, where one A100 node is free
        first_a = h.submit(_spec("dev2-a100-a", resources=WHOLE_A100, sbatch={"clusters": [SECOND]}, command="sleep 20"))
        then_b = h.submit(_spec("dev2-a100-b", tenant="tenant-b", resources=WHOLE_A100,
                                sbatch={"clusters": [SECOND]}, command="sleep 20"))  # fmt: skip
        h.run_until(lambda: _running_in_slurm(h, then_b)() or _running_in_slurm(h, first_a)(), timeout_s=60)
        usage = {t: _tenant_usage(h, t) for t in ("tenant-a", "tenant-b")}
        print(f"\ndecayed usage when dev2's A100 node was given: {usage}; "
              f"tenant-b's job {h.state(then_b).value}, tenant-a's {h.state(first_a).value}")
        assert usage["tenant-a"] > usage["tenant-b"]
        assert _running_in_slurm(h, then_b)() and h.state(first_a) == JobState.PENDING
        assert {cluster_of(node) for node in _nodes(h, then_b)} == {SECOND}
        for job in (*on_emu, first_a, then_b):
            h.service.cancel(job)
        h.run_until(h.all_finished([*on_emu, first_a, then_b]), timeout_s=90)
    finally:
        subprocess.run(["scancel", "-M", SECOND, blocker], capture_output=True, timeout=30)


def _tenant_usage(h: DaemonHarness, tenant: str) -> float:
    """_tenant_usage is the tenant's decayed GPU-seconds in the store (every cluster's work counts)."""
    with h.service.db.session() as session:
        row = session.get(TenantUsage, tenant)
    return float(row.decayed_gpu_seconds) if row else 0.0


def _squeue_running(job_id: str) -> bool:
    """_squeue_running is true while dev2's squeue shows the job running."""
    out = subprocess.run(["squeue", "-M", SECOND, "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True,
                         timeout=30).stdout  # fmt: skip
    return "RUNNING" in out


_LIVE = {s.value for s in (AttemptState.CREATED, AttemptState.LAUNCHING, AttemptState.LAUNCH_UNKNOWN,
                           AttemptState.RUNNING, AttemptState.STOPPING)}  # fmt: skip


def _set_dev2_grptres(account: str, grp_tres: str) -> None:
    """_set_dev2_grptres sets an account's GrpTRES on dev2's association only (sacctmgr, the shared slurmdbd)."""
    args = ["sacctmgr", "-i", "modify", "account", "where", f"name={account}", f"cluster={SECOND}",
            "set", f"GrpTRES={grp_tres}"]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_clusters_own_association_limit_holds_there(two_clusters: DaemonHarness) -> None:
    """Slurm's GrpTRES is per cluster: tenant-a's A100 limit is 16 on emu, 8 on dev2 (its own association)."""
    h = two_clusters
    _set_dev2_grptres("tenant-a", "gres/gpu:a100=8")
    try:
        assert "tenant-a" in (h.daemon.shares.sync() or [])
        with h.service.db.session() as session:
            stored = session.get(Tenant, "tenant-a")
            assert stored is not None and stored.cluster_limits == {FIRST: {"a100": 16}, SECOND: {"a100": 8}}
        # four whole A100 nodes asked: emu's two and one of dev2's at once, never two placed on dev2
        # (a second would sit in dev2's queue behind AssocGrpGRES, out of metasched's hands)
        jobs = [h.submit(_spec(f"a100-limit-{i}", resources=WHOLE_A100, command="sleep 8")) for i in range(4)]
        most_on_dev2 = most_at_once = 0

        def watch() -> bool:
            nonlocal most_on_dev2, most_at_once
            live = [a for job in jobs for a in _attempts(h, job) if a.state in _LIVE]
            most_at_once = max(most_at_once, len(live))
            most_on_dev2 = max(most_on_dev2, sum(cluster_of(n) == SECOND for a in live for n in (a.nodes or [])))
            return h.all_finished(jobs)()

        h.run_until(watch, timeout_s=180)
        assert all(h.state(job) == JobState.SUCCEEDED for job in jobs)
        print(f"\nper-cluster A100 limit: at most {most_at_once} at once, {most_on_dev2} on dev2")
        assert most_on_dev2 == 1 and most_at_once == 3, (most_on_dev2, most_at_once)
    finally:
        _set_dev2_grptres("tenant-a", "gres/gpu:a100=16")  # as deploy/devcluster sets it


def test_clusters_auto_finds_dev2_in_slurmdbd_and_reaches_it_with_minus_m(
    slurm_exclusive: None, pg_service: Service, tmp_path: Path
) -> None:
    """``--clusters auto``: no slurm.conf of dev2's is named; sacctmgr lists it and every command asks it with -M."""
    with daemon_over_pair(pg_service, tmp_path, entries=["auto"]) as h:
        assert h.client.clusters == (FIRST, SECOND)  # type: ignore[attr-defined]
        job = h.submit(_spec("by-name-on-dev2", sbatch={"clusters": [SECOND]}, command="sleep 2"))
        h.run_until(h.all_finished([job]), timeout_s=120)
        assert h.state(job) == JobState.SUCCEEDED
        (attempt,) = _attempts(h, job)
        cluster, bare = split_qualified(attempt.slurm_job_id)
        assert cluster == SECOND and {cluster_of(node) for node in _nodes(h, job)} == {SECOND}
        runner = h.client.client(SECOND).runner  # type: ignore[attr-defined]
        assert runner.argv_for("sbatch", []) == ["sbatch", f"--clusters={SECOND}"]
        assert runner.env.get("SLURM_CONF") != SECOND_CONF  # dev2's own slurm.conf is never named
        done = subprocess.run(["sacct", "-M", SECOND, "-n", "-X", "-P", "-j", bare, "-o", "State"],
                              capture_output=True, text=True, timeout=30)  # fmt: skip
        assert done.stdout.split() == ["COMPLETED"], done.stdout + done.stderr

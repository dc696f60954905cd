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
  job on dev2 (sacct -M dev2: CANCELLED).
"""

from __future__ import annotations

import pytest

from meta.model.clusters import cluster_of, split_qualified
from meta.model.states import AttemptState, JobState
from meta.policy.plan import ReasonCode
from tests.harness import DaemonHarness
from tests.integration.second_cluster import SECOND
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

"""Per-cluster fit (issue 26, ``meta/policy/cluster_fit.py``): each cluster's verdict for a task's shape, pure."""

from __future__ import annotations

import pytest

from meta.policy.cluster_fit import ClusterFit, Fit, site_clusters, static_fit, task_fit
from meta.policy.shape import shape_of
from tests.policy.builders import node, task

# a: two 8-H100 nodes; b: three 4-A100 nodes, one of them down
A = (node("a/n1", switch=None), node("a/n2", switch=None))
B = (node("b/n1", gpus=4, gpu_type="a100", switch=None), node("b/n2", gpus=4, gpu_type="a100", switch=None),
     node("b/n3", gpus=4, gpu_type="a100", switch=None, healthy=False))
SITE = A + B


def _verdicts(fits: list[ClusterFit]) -> dict[str, Fit]:
    return {f.cluster: f.verdict for f in fits}


def _fit(tid: str = "t", drained: dict[str, str] | None = None, **kw) -> list[ClusterFit]:
    return static_fit(shape_of(task(tid, **kw)), SITE, drained)


def test_a_single_cluster_site_has_no_clusters_to_judge() -> None:
    plain = (node("n1"), node("n2"))
    assert site_clusters(plain) == [] and static_fit(shape_of(task("t")), plain) == []
    assert site_clusters(SITE) == ["a", "b"]


@pytest.mark.parametrize(
    ("kw", "want"),
    [
        ({"gpus": 1, "gpu_type": None}, {"a": Fit.FITS, "b": Fit.FITS}),
        ({"gpus": 1, "gpu_type": "h100"}, {"a": Fit.FITS, "b": Fit.NEVER_FITS}),
        ({"gpus": 8, "gpu_type": "a100"}, {"a": Fit.NEVER_FITS, "b": Fit.NEVER_FITS}),
        ({"gpus": 4, "gpu_type": "a100", "workers": 3, "one_per_node": True}, {"a": Fit.NEVER_FITS, "b": Fit.NODES_DOWN}),
        ({"gpus": 4, "gpu_type": "a100", "workers": 4, "one_per_node": True}, {"a": Fit.NEVER_FITS, "b": Fit.TOO_FEW}),
        ({"gpus": 1, "gpu_type": None, "clusters": frozenset({"b"})}, {"a": Fit.NOT_LISTED, "b": Fit.FITS}),
        ({"gpus": 1, "gpu_type": None, "nodelist": frozenset({"a/n1"})}, {"a": Fit.FITS, "b": Fit.EXCLUDED}),
        ({"gpus": 1, "gpu_type": None, "exclude": frozenset({"b/n1", "b/n2", "b/n3"})},
         {"a": Fit.FITS, "b": Fit.EXCLUDED}),
    ],
    ids=["any-gpu", "h100-only", "too-many-gpus", "gang-on-down-node", "gang-too-big", "-M b", "-w", "-x"],
)
def test_each_cluster_gets_the_first_reason_that_keeps_the_task_off_it(kw: dict, want: dict[str, Fit]) -> None:
    assert _verdicts(_fit(**kw)) == want


def test_the_messages_say_why_in_the_words_of_the_feasibility_chain() -> None:
    a, b = _fit(gpus=1, gpu_type="h100")
    assert a.message == "fits: 2 nodes for a worker of 1 h100 GPU can host it"
    assert b.message == "no node has h100 GPUs (types here: a100)"
    _, gang = _fit(gpus=4, gpu_type="a100", workers=4, one_per_node=True)
    assert gang.message.startswith("even an empty cluster fits only 3 of 4 workers")
    _, down = _fit(gpus=4, gpu_type="a100", workers=3, one_per_node=True)
    assert "down or drained in Slurm" in down.message
    listed, _ = _fit(gpus=1, clusters=frozenset({"b"}))
    assert listed.message == "not in the job's --clusters (b)"


def test_an_admin_drain_comes_before_capacity_but_after_the_jobs_own_list() -> None:
    fits = _fit(gpus=1, gpu_type="h100", drained={"a": "switch firmware", "b": ""})
    assert [(f.verdict, f.message) for f in fits] == [
        (Fit.DRAINED, "drained by an admin: switch firmware (no new work goes there)"),
        (Fit.DRAINED, "drained by an admin (no new work goes there)"),
    ]
    assert _verdicts(_fit(gpus=1, gpu_type=None, drained={"a": ""}, clusters=frozenset({"b"}))) == {"a": Fit.NOT_LISTED,
                                                                                     "b": Fit.FITS}


def test_avoid_nodes_are_no_reason_to_rule_out_a_cluster() -> None:
    assert _verdicts(_fit(gpus=1, gpu_type="h100", avoid_nodes=frozenset({"a/n1", "a/n2"})))["a"] is Fit.FITS


def test_a_placed_task_names_its_nodes_and_where_the_other_cluster_stands() -> None:
    fits = task_fit(_fit(gpus=1, gpu_type=None), placed=["b/n2"], attempt="runs")
    assert [(f.cluster, f.verdict, f.nodes) for f in fits] == [("a", Fit.FITS, ()), ("b", Fit.PLACED, ("b/n2",))]
    assert fits[0].message.endswith("; the cycle placed it on b") and fits[1].message == "runs here on b/n2"
    assert fits[1].to_dict() == {"cluster": "b", "verdict": "placed", "message": "runs here on b/n2",
                                 "nodes": ["b/n2"]}


def test_a_task_waiting_for_room_makes_a_fitting_cluster_busy_and_nothing_else() -> None:
    fits = task_fit(_fit(gpus=1, gpu_type="h100"), waiting="NoFeasibleNode")
    assert _verdicts(fits) == {"a": Fit.BUSY, "b": Fit.NEVER_FITS}
    assert fits[0].message == "fits, but the last cycle found no room for it here (NoFeasibleNode)"


def test_a_task_waiting_for_its_own_gate_leaves_the_clusters_fitting() -> None:
    (a, _) = task_fit(_fit(gpus=1, gpu_type="h100"), waiting="WaitingForQuota")
    assert a.verdict is Fit.FITS and "waits for its reason (WaitingForQuota), not for a cluster" in a.message
    (fresh, _) = task_fit(_fit(gpus=1, gpu_type="h100"), waiting="")
    assert fresh.verdict is Fit.FITS and fresh.message == "fits: 2 nodes for a worker of 1 h100 GPU can host it"


def test_a_retried_task_that_waits_says_where_its_last_attempt_ran() -> None:
    fits = task_fit(_fit(gpus=1, gpu_type=None), placed=["a/n1"], attempt="ran (attempt 1: failed)",
                    waiting="NoFeasibleNode")
    assert _verdicts(fits) == {"a": Fit.BUSY, "b": Fit.BUSY}
    assert fits[0].message.endswith("; its last attempt ran (attempt 1: failed) here on a/n1")
    assert "last attempt" not in fits[1].message


def test_a_tenant_confined_elsewhere_comes_after_the_jobs_own_list() -> None:
    fits = static_fit(shape_of(task("t", gpus=1, gpu_type=None)), SITE, tenant=frozenset({"b"}))
    assert [(f.verdict, f.message) for f in fits] == [
        (Fit.TENANT_CONFINED, "the tenant may run only on b (an admin's setting)"),
        (Fit.FITS, "fits: 2 nodes for a worker of 1 GPU can host it (1 more down or drained in Slurm)"),
    ]
    listed = static_fit(shape_of(task("t", gpus=1, clusters=frozenset({"b"}))), SITE, tenant=frozenset({"b"}))
    assert _verdicts(listed)["a"] is Fit.NOT_LISTED

"""A dark cluster (issue 26): its attempts stay unknown, not lost; only inference partitions are replayed, once.

Two fake clusters behind one ``ClusterSet``; cluster b's controller stops answering (squeue
fails). Its attempts are not judged from the period's read however long their silence lasts;
past ``dark_grace_s`` an inference partition is lost as ``cluster_dark`` (no retry budget
spent) and placed again, while training waits; when b answers again, the copy that ran on is
an orphan and is cancelled (its output commit was fenced all along).
tests/integration/test_two_clusters.py stops the real dev2's slurmctld.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

from meta.cycle.lease import Leadership
from meta.cycle.reconcile import Reconciler, ReconcileResult, ReconcileSettings, observe
from meta.model.kinds import FailureCategory
from meta.model.spec import AnySpec
from meta.model.states import AttemptState, TaskState
from meta.service.api import Service
from meta.store.models import Attempt
from slurm_bridge import tags
from slurm_bridge.clusters import ClusterSet
from slurm_bridge.errors import SlurmTransient
from slurm_bridge.fake import FakeSlurm
from tests.runtime.support import attempt, inference, lead, place, share, submit, task, training

SETTINGS = ReconcileSettings(unknown_window_s=15.0, lost_grace_s=120.0, lease_s=300.0, daemon_uid=0)


def _clusters() -> tuple[ClusterSet, FakeSlurm, FakeSlurm]:
    a, b = FakeSlurm(first_job_id=1000), FakeSlurm(first_job_id=1000)  # the same ids on both
    b.sdiag = lambda: None  # type: ignore[attr-defined] - the prober's question: answers while b is up
    return ClusterSet({"a": a, "b": b}, background=False), a, b


def _running_on_b(service: Service, reconciler: Reconciler, b: FakeSlurm, spec: AnySpec) -> tuple[str, str, str]:
    """_running_on_b is (task, attempt, Slurm job) of a task running on cluster b under this site's tag."""
    _, (task_id, *_) = submit(service, spec)
    attempt_id = place(service.db, task_id, [share("b/node1")], AttemptState.RUNNING)
    job = b.add_job("x", tags.comment(reconciler.site, attempt_id), "RUNNING", ("node1",), uid=0)
    with service.db.session() as session:
        session.get(Attempt, attempt_id).slurm_job_id = f"b/{job.job_id}"
    return task_id, attempt_id, str(job.job_id)


def _reconcile(reconciler: Reconciler, site: ClusterSet, leadership: Leadership, later_s: float) -> ReconcileResult:
    observation = observe(site, reconciler.since(), site=reconciler.site)
    observation = dataclasses.replace(observation, at=observation.at + timedelta(seconds=later_s))
    return reconciler.apply(observation, leadership)


def test_a_dark_clusters_attempts_are_never_lost_while_it_is_dark(service: Service, tmp_path: Path) -> None:
    site, _, b = _clusters()
    reconciler = Reconciler(service.db, site, dataclasses.replace(SETTINGS, dark_grace_s=None))
    leadership = lead(service.db)
    _, infer, _ = _running_on_b(service, reconciler, b, inference(str(tmp_path / "out"), partitions=1))
    _, train, _ = _running_on_b(service, reconciler, b, training())
    b.squeue_fault = SlurmTransient("slurm_load_jobs error: Unable to contact slurm controller", command="squeue")
    for later_s in (0.0, SETTINGS.lost_grace_s * 3):  # silent far past the lost grace
        result = _reconcile(reconciler, site, leadership, later_s)
        assert result.lost == [] and result.relaunch == [] and result.orphans_cancelled == []
    assert {attempt(service.db, a).state for a in (infer, train)} == {AttemptState.RUNNING.value}


def test_past_the_grace_an_inference_partition_is_replayed_and_its_copy_cancelled(service: Service, tmp_path: Path) -> None:
    site, _, b = _clusters()
    reconciler = Reconciler(service.db, site, dataclasses.replace(SETTINGS, dark_grace_s=0.0))
    leadership = lead(service.db)
    infer_task, infer, infer_job = _running_on_b(service, reconciler, b, inference(str(tmp_path / "out"), partitions=1))
    _, train, _ = _running_on_b(service, reconciler, b, training())
    b.squeue_fault = SlurmTransient("slurm_load_jobs error: Unable to contact slurm controller", command="squeue")
    result = _reconcile(reconciler, site, leadership, 0.0)
    assert result.lost == [infer]  # training waits for its cluster: its checkpoints may live only there
    row = attempt(service.db, infer)
    assert (row.state, row.failure_category) == (AttemptState.LOST.value, FailureCategory.CLUSTER_DARK.value)
    replayed = task(service.db, infer_task)
    assert replayed.state == TaskState.PENDING.value and replayed.retry_base == 1  # no retry budget spent
    assert attempt(service.db, train).state == AttemptState.RUNNING.value

    b.squeue_fault = None
    site.probe_dark()  # b answers again: its copy of the replayed partition is an orphan
    back = _reconcile(reconciler, site, leadership, 0.0)
    assert back.orphans_cancelled == [f"b/{infer_job}"]
    assert (infer_job, None) in b.cancels
    assert attempt(service.db, train).state == AttemptState.RUNNING.value


def test_a_dark_clusters_attempts_cost_no_accounting_read_yet_are_replayed(service: Service, tmp_path: Path) -> None:
    site, a, b = _clusters()
    reconciler = Reconciler(service.db, site, dataclasses.replace(SETTINGS, dark_grace_s=None))
    leadership = lead(service.db)
    _, (on_a_task, *_) = submit(service, training())  # this one runs on cluster a, in its squeue every period
    on_a = place(service.db, on_a_task, [share("a/node1")], AttemptState.RUNNING)
    job = a.add_job("x", tags.comment(reconciler.site, on_a), "RUNNING", ("node1",), uid=0)
    with service.db.session() as session:
        session.get(Attempt, on_a).slurm_job_id = f"a/{job.job_id}"
    _, infer, _ = _running_on_b(service, reconciler, b, inference(str(tmp_path / "out"), partitions=1))
    b.squeue_fault = SlurmTransient("slurm_load_jobs error: Unable to contact slurm controller", command="squeue")
    reconciler.run(leadership)  # finds b dark
    reads = a.calls["sacct"]
    for _ in range(3):  # a's accounting cannot tell about b's attempts: it is not read for them every period
        assert reconciler.run(leadership).lost == []
    assert a.calls["sacct"] == reads
    assert {attempt(service.db, x).state for x in (on_a, infer)} == {AttemptState.RUNNING.value}
    reconciler.settings = dataclasses.replace(reconciler.settings, dark_grace_s=0.0)
    assert reconciler.run(leadership).lost == [infer]  # still looked at: replayed past the grace

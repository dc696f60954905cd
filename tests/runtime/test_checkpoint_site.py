"""Where a checkpoint can be read (issue 26, ``checkpoint/site.py``): the cluster of the attempt that wrote it."""

from __future__ import annotations

from checkpoint.registry import report
from checkpoint.site import resume_cluster, written_on
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store.models import Task
from tests.runtime.support import checkpointing, place, share, submit, training


def test_the_newest_checkpoint_names_its_writers_cluster(service: Service) -> None:
    _, (t,) = submit(service, checkpointing())
    with service.db.session() as session:
        assert written_on(session, t) == ""  # nothing reported yet
    a = place(service.db, t, [share("dev2/n1"), share("dev2/n2")], AttemptState.RUNNING)
    with service.db.session() as session:
        report(session, a, 1, 100, "/ck/100")
    with service.db.session() as session:
        assert written_on(session, t) == "dev2"
        task = session.get(Task, t)
        assert task is not None
        task.attempts_made = 1  # a retry: it ran before
        assert resume_cluster(session, task, checkpointing()) == "dev2"
        shared = training("s", checkpoint={"dir": "/shared/ck", "shared": True})
        assert resume_cluster(session, task, shared) == ""  # readable on every cluster
        task.attempts_made = 0
        assert resume_cluster(session, task, checkpointing()) == ""  # a first attempt is not a retry


def test_without_qualified_nodes_the_qualified_slurm_job_id_names_the_cluster(service: Service) -> None:
    _, (t,) = submit(service, training("plain", checkpoint={"dir": "/ck"}))
    a = place(service.db, t, [share("node1")], AttemptState.RUNNING, slurm_job_id="emu/4711")
    with service.db.session() as session:
        report(session, a, 1, 5, "/ck/5")
    with service.db.session() as session:
        assert written_on(session, t) == "emu"


def test_a_single_cluster_site_pins_nothing(service: Service) -> None:
    _, (t,) = submit(service, checkpointing())
    a = place(service.db, t, [share("node1")], AttemptState.RUNNING)
    with service.db.session() as session:
        report(session, a, 1, 5, "/ck/5")
    with service.db.session() as session:
        assert written_on(session, t) == ""

"""Data locality at submit (issue 26): ``data: {cluster, required}`` is checked like the job's -M list.

Through the service (SQLite and PostgreSQL): a required data cluster outside the job's own -M list
is a spec error, one outside its tenant's clusters is refused as unschedulable (nothing stored),
one on a cluster no node of the stored inventory is on is refused once the inventory is known; a
preferred data cluster is never a reason to refuse.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from meta.model.errors import Unschedulable
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.model.spec import SpecError, spec_to_json
from meta.service.api import Service
from meta.service.feasibility import InventoryFeasibility
from meta.service.operations import Operations
from meta.store.db import Database
from meta.store.inventory import save_inventory
from meta.store.lifecycle import job_spec
from meta.store.models import Job
from tenants.identity import ADMIN
from tests.runtime.support import training


@pytest.fixture
def checked(database: Database) -> Service:
    """checked is the service with its submit-time feasibility check, as ``Service.open`` builds it."""
    return Service(database, feasibility=InventoryFeasibility(database))


def _jobs(service: Service) -> int:
    with service.db.session() as session:
        return session.scalar(select(func.count()).select_from(Job)) or 0


def test_required_data_outside_the_jobs_clusters_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"data.cluster dev2 is required but not in the job's --clusters \(emu\)"):
        training("t", "tenant-a", sbatch={"clusters": ["emu"]}, data={"cluster": "dev2", "required": True})
    with pytest.raises(SpecError, match="data.cluster: not a cluster name"):
        training("t", "tenant-a", data={"cluster": "dev/2"})
    with pytest.raises(SpecError, match="data.where"):
        training("t", "tenant-a", data={"cluster": "dev2", "where": "x"})
    # only a preference: the -M list simply wins
    assert training("t", "tenant-a", sbatch={"clusters": ["emu"]}, data={"cluster": "dev2"}).data is not None


def test_required_data_outside_the_tenants_clusters_is_refused(checked: Service) -> None:
    Operations(checked, ADMIN).set_tenant("tenant-a", clusters=["emu"])
    with pytest.raises(Unschedulable) as caught:
        checked.submit(training("t", "tenant-a", data={"cluster": "dev2", "required": True}))
    assert str(caught.value) == (
        "UnschedulableAndUnresolvable: its data must be read on dev2 (data.required), but it may run only on the "
        "clusters emu (the job's --clusters and its tenant's clusters) (submit it with dev2 in --clusters, or ask "
        "an admin to let the tenant run on dev2)")
    assert _jobs(checked) == 0
    assert checked.submit(training("soft", "tenant-a", data={"cluster": "dev2"})).created  # a preference only
    assert checked.submit(training("here", "tenant-a", data={"cluster": "emu", "required": True})).created


def test_required_data_on_a_cluster_without_nodes_is_refused_once_the_inventory_is_known(checked: Service) -> None:
    a100 = ResourceVector(cpus=64, memory=512 * 1024, gpus=8, gpu_type="a100")
    with checked.db.session() as session:
        save_inventory(session, [NodeState("emu/a1", a100, ("gpu",)), NodeState("dev2/a1", a100, ("gpu",))],
                       version=1, switch_parent={})  # fmt: skip
    with pytest.raises(Unschedulable, match="UnschedulableAndUnresolvable"):
        checked.submit(training("t", "tenant-a", data={"cluster": "dev3", "required": True}))
    assert checked.submit(training("dev2", "tenant-a", data={"cluster": "dev2", "required": True})).created
    assert checked.submit(training("soft", "tenant-a", data={"cluster": "dev3"})).created


def test_the_stored_spec_keeps_data_and_old_specs_keep_their_text(checked: Service) -> None:
    created = checked.submit(training("t", "tenant-a", data={"cluster": "dev2", "required": True},
                                      checkpoint={"dir": "/shared/ckpt", "shared": True}))
    with checked.db.session() as session:
        spec = job_spec(session, created.job.id)
    assert spec.data is not None and spec.data.cluster == "dev2" and spec.data.required
    assert spec.checkpoint is not None and spec.checkpoint.shared  # type: ignore[union-attr]
    # unset, the new fields are left out: a spec stored before them hashes as it did
    plain = json.loads(spec_to_json(training("p", "tenant-a", checkpoint={"dir": "/c"})))
    assert "data" not in plain and "shared" not in plain["checkpoint"]

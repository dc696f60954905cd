"""Shares from Slurm (docs/identity.md §6): Fairshare -> weight, GrpTRES GPUs -> limits, with their source.

Unit tests on the fake Slurm (SQLite and PostgreSQL); one live test on the dev cluster that the
70/30 Fairshare of tenant-a/tenant-b arrives as weights.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.inventory.reader import InventoryReader
from meta.cycle.inventory.shares import SharesSync, limits_by_cluster
from meta.model.errors import Forbidden, InvalidRequest
from meta.service.api import Service
from meta.store import audit
from meta.store.db import Database
from slurm_bridge.clusters import ClusterSet
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.errors import SlurmTransient
from slurm_bridge.fake import FakeSlurm
from tenants.identity import ADMIN, member
from tenants.quotas import SlurmOwnedSetting, admin_set_tenant, get_tenant, list_tenants, set_tenant
from tests.conftest import sqlite_database

OSCAR = member("oscar", 2005, ["research"], admin=True)


@pytest.fixture
def slurm() -> FakeSlurm:
    fake = FakeSlurm()
    fake.set_account("root", 1, parent="")
    fake.set_account("tenant-a", 70, "gres/gpu:a100=16,cpu=64")
    fake.set_account("tenant-b", 30, "gres/gpu=40")
    fake.set_account("research", None)  # Fairshare=parent
    return fake


def test_fairshare_becomes_the_weight_and_grptres_gpus_the_limits(service: Service, slurm: FakeSlurm) -> None:
    changed = SharesSync(service.db, slurm).sync()
    assert sorted(changed or []) == ["research", "tenant-a", "tenant-b"]
    with service.db.session() as session:
        views = {v.name: v for v in list_tenants(session)}
    assert "root" not in views  # the association tree's root is no tenant
    assert (views["tenant-a"].weight, views["tenant-a"].limits) == (70.0, {"a100": 16})
    assert (views["tenant-b"].weight, views["tenant-b"].limits) == (30.0, {"*": 40})
    assert views["tenant-a"].sources == {"weight": "slurm", "guaranteed": "metasched", "limits": "slurm"}
    # Fairshare=parent: no weight of its own, the stored one (default 1) stays metasched's
    assert views["research"].weight == 1.0 and views["research"].sources["weight"] == "metasched"


def test_a_sync_changes_only_what_slurm_changed_and_audits_it(service: Service, slurm: FakeSlurm) -> None:
    sync = SharesSync(service.db, slurm)
    sync.sync()
    assert sync.sync() == []  # nothing changed: nothing written to the audit
    slurm.set_account("tenant-b", 50, "gres/gpu:t4=8")
    assert sync.sync() == ["tenant-b"]
    with service.db.session() as session:
        assert get_tenant(session, "tenant-b").limits == {"t4": 8}
        lines = [e for e in audit.read(session) if e.action == "tenant.sync"]
    assert len(lines) == 4 and lines[0].actor == "slurm"
    assert lines[0].detail == {"weight": 50.0, "limits": {"t4": 8}}


def test_guarantees_stay_metaschedss_across_syncs(service: Service, slurm: FakeSlurm) -> None:
    with service.db.session() as session:
        admin_set_tenant(session, OSCAR, "tenant-a", guaranteed={"a100": 8})
    SharesSync(service.db, slurm).sync()
    with service.db.session() as session:
        view = get_tenant(session, "tenant-a")
    assert view.guaranteed == {"a100": 8} and view.sources["guaranteed"] == "metasched"
    assert view.weight == 70.0


def test_only_the_local_clusters_accounts_are_synced(service: Service, slurm: FakeSlurm) -> None:
    slurm.set_account("elsewhere", 5)
    other = slurm.accounts["elsewhere"]
    slurm.accounts["elsewhere"] = type(other)(**{**other.__dict__, "cluster": "other-cluster"})
    SharesSync(service.db, slurm).sync()
    with service.db.session() as session:
        assert "elsewhere" not in {v.name for v in list_tenants(session)}


def test_each_site_clusters_own_limits_are_synced_where_they_differ(service: Service, slurm: FakeSlurm) -> None:
    # one slurmdbd serves both clusters: sacctmgr lists tenant-a on fake (a100=16) and on dev2 (gpu=8)
    own = slurm.accounts["tenant-a"]
    on_dev2 = type(own)(**{**own.__dict__, "cluster": "dev2", "gpu_limits": {"*": 8}, "grp_tres": "gres/gpu=8"})
    slurm.account_shares = lambda: [*slurm.accounts.values(), on_dev2]  # type: ignore[method-assign]
    site = ClusterSet({"fake": slurm, "dev2": FakeSlurm()}, background=False)
    sync = SharesSync(service.db, site)
    sync.sync()
    with service.db.session() as session:
        views = {v.name: v for v in list_tenants(session)}
        detail = next(e.detail for e in audit.read(session) if e.action == "tenant.sync" and e.subject == "tenant-a")
    assert views["tenant-a"].limits == {"a100": 16}  # the home cluster's, as on a site of one cluster
    assert views["tenant-a"].cluster_limits == {"fake": {"a100": 16}, "dev2": {"*": 8}}
    assert views["tenant-b"].cluster_limits == {}  # one row: the limits say it
    assert detail["cluster_limits"] == {"fake": {"a100": 16}, "dev2": {"*": 8}}
    # Slurm drops dev2's limit: the tenant's limits hold on every cluster again
    slurm.account_shares = lambda: list(slurm.accounts.values())  # type: ignore[method-assign]
    assert sync.sync() == ["tenant-a"]
    with service.db.session() as session:
        assert get_tenant(session, "tenant-a").cluster_limits == {}
    # one cluster's client: never per-cluster limits, whatever sacctmgr lists
    assert limits_by_cluster([own, on_dev2], ()) == {}


def test_accounting_down_skips_the_sync_and_keeps_the_settings(service: Service, slurm: FakeSlurm) -> None:
    sync = SharesSync(service.db, slurm)
    sync.sync()
    slurm.accounting_fault = SlurmTransient("sacctmgr: error: slurmdbd not responding")
    assert sync.sync() is None
    with service.db.session() as session:
        assert get_tenant(session, "tenant-a").weight == 70.0


def test_the_shares_step_syncs_at_the_topology_cadence_and_never_fails_on_it(tmp_path: Path) -> None:
    db = sqlite_database(tmp_path / "s.sqlite")
    slurm = FakeSlurm()
    slurm.set_account("tenant-a", 70)
    shares = SharesSync(db, slurm, refresh_s=3600)  # the daemon's step 3, at the topology cadence
    shares.sync_if_due(0.0)
    shares.sync_if_due(1.0)
    assert slurm.calls["account_shares"] == 1  # not every period
    with db.session() as session:
        assert get_tenant(session, "tenant-a").weight == 70.0
    slurm.accounting_fault = SlurmTransient("slurmdbd down")
    assert SharesSync(db, slurm, refresh_s=0).sync_if_due(0.0) is None  # the period goes on
    assert InventoryReader(db, slurm, topology_refresh_s=0).read().nodes  # and so does step 2
    db.dispose()


def test_the_period_runs_the_shares_step_after_the_inventory(tmp_path: Path) -> None:
    db = sqlite_database(tmp_path / "s.sqlite")
    slurm = FakeSlurm()
    slurm.set_account("tenant-a", 70)
    config = DaemonConfig(period_s=0.0, topology_refresh_s=3600, launch=LaunchSettings(log_dir=str(tmp_path)))
    daemon = Daemon(db, slurm, config)
    try:
        assert not daemon.period().error
        assert not daemon.period().error
    finally:
        daemon.close_launches(1.0)
    assert slurm.calls["account_shares"] == 1  # step 3, at the topology cadence
    with db.session() as session:
        assert get_tenant(session, "tenant-a").weight == 70.0
    db.dispose()


# --- tenant set: what an admin may still set ------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "command"),
    [
        ({"weight": 3.0}, "sacctmgr modify account where name=tenant-a set fairshare=3"),
        ({"limits": {"a100": 32}}, "sacctmgr modify account where name=tenant-a set grptres=gres/gpu:a100=32"),
        ({"limits": {"*": 64, "t4": 8}}, "set grptres=gres/gpu=64,gres/gpu:t4=8"),
        ({"weight": 2.0, "limits": {"*": 8}}, "set fairshare=2 grptres=gres/gpu=8"),
    ],
)
def test_weights_and_limits_are_refused_with_the_sacctmgr_command(
    service: Service, kw: dict, command: str
) -> None:
    with service.db.session() as session, pytest.raises(SlurmOwnedSetting) as caught:
        admin_set_tenant(session, OSCAR, "tenant-a", **kw)
    message = str(caught.value)
    assert command in message and "\n" not in message and "set in Slurm" in message
    assert isinstance(caught.value, InvalidRequest)  # exit 2, nothing written
    with service.db.session() as session:
        assert list_tenants(session) == []


def test_guarantees_are_admin_only_audited_and_bounded_by_slurms_limit(service: Service, slurm: FakeSlurm) -> None:
    with service.db.session() as session, pytest.raises(Forbidden, match="only an admin"):
        admin_set_tenant(session, member("dave", 2004, ["tenant-a"], coordinates=["tenant-a"]), "tenant-a",
                         guaranteed={"a100": 8})
    SharesSync(service.db, slurm).sync()
    with service.db.session() as session, pytest.raises(InvalidRequest, match="above Slurm's limit 16"):
        admin_set_tenant(session, OSCAR, "tenant-a", guaranteed={"a100": 17})
    with service.db.session() as session:
        view = admin_set_tenant(session, OSCAR, "tenant-a", guaranteed={"a100": 16})
    assert view.guaranteed == {"a100": 16} and view.limits == {"a100": 16} and view.sources["limits"] == "slurm"
    with service.db.session() as session:
        [line] = [e for e in audit.read(session) if e.action == "tenant.set"]
    assert line.actor == "oscar" and line.detail["guaranteed"] == {"a100": 16}


def test_a_setting_made_in_metasched_says_so_until_slurm_syncs_it(service: Service, slurm: FakeSlurm) -> None:
    with service.db.session() as session:
        set_tenant(session, "tenant-a", actor=ADMIN.name, weight=5.0)  # the internal write (tests, tools)
        assert get_tenant(session, "tenant-a").sources["weight"] == "metasched"
    SharesSync(service.db, slurm).sync()
    with service.db.session() as session:
        view = get_tenant(session, "tenant-a")
    assert view.weight == 70.0 and view.sources["weight"] == "slurm"


# --- the dev cluster ------------------------------------------------------------------------


@pytest.mark.slurm
def test_the_dev_clusters_70_30_fairshare_arrives_as_weights(slurm_cluster: None, tmp_path: Path) -> None:
    db: Database = sqlite_database(tmp_path / "live.sqlite")
    try:
        changed = SharesSync(db, CliSlurmClient()).sync()
        assert changed is not None, "sacctmgr could not be read"
        with db.session() as session:
            views = {v.name: v for v in list_tenants(session)}
        assert (views["tenant-a"].weight, views["tenant-b"].weight) == (70.0, 30.0)
        assert views["tenant-a"].sources["weight"] == views["tenant-b"].sources["weight"] == "slurm"
        # deploy/devcluster sets GrpTRES at the cluster's capacity
        assert views["tenant-a"].limits == {"a100": 16} and views["tenant-b"].limits == {"*": 40}
    finally:
        db.dispose()

"""Where a tenant may run (migration 0019, issue 26): ``tenants.clusters`` is set, replaced, cleared, checked and audited."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from meta.model.errors import Forbidden, InvalidRequest
from meta.store import audit
from meta.store.db import Database
from meta.store.models import Tenant
from tenants.identity import ADMIN, Principal, member
from tenants.quotas import (
    MAX_TENANT_CLUSTERS,
    TenantView,
    admin_set_tenant,
    get_tenant,
    list_tenants,
    set_tenant,
)

ALICE = member("alice", 2001, ["tenant-a"])


def _set(db: Database, clusters: list[str] | None, who: Principal = ADMIN, **other: object) -> TenantView:
    with db.session() as session:
        return admin_set_tenant(session, who, "tenant-a", clusters=clusters, **other)  # type: ignore[arg-type]


def _stored(db: Database) -> list[str] | None:
    with db.session() as session:
        tenant = session.get(Tenant, "tenant-a")
        return tenant.clusters if tenant is not None else None


def test_the_column_is_a_nullable_one_on_tenants(database: Database) -> None:
    column = {c["name"]: c for c in inspect(database.engine).get_columns("tenants")}["clusters"]
    assert column["nullable"] is True


def test_clusters_are_set_sorted_once_each_replaced_and_cleared(database: Database) -> None:
    assert _set(database, ["emu", "dev2", "emu"]).clusters == ["dev2", "emu"]
    assert _stored(database) == ["dev2", "emu"]
    assert _set(database, ["dev2"]).clusters == ["dev2"]  # a new list replaces the old one
    assert _set(database, None, guaranteed={"a100": 2}).clusters == ["dev2"]  # not given: unchanged
    assert _set(database, []).clusters is None  # cleared: any cluster again, stored as NULL
    assert _stored(database) is None


def test_a_tenant_without_a_setting_may_run_anywhere(database: Database) -> None:
    with database.session() as session:
        set_tenant(session, "tenant-b", guaranteed={"a100": 1})
        assert get_tenant(session, "tenant-b").clusters is None
        assert [view.clusters for view in list_tenants(session)] == [None]


@pytest.mark.parametrize("names, message", [
    (["dev2", "bad/name"], "not a cluster name: 'bad/name'"),
    ([""], "not a cluster name"),
    (["x" * 21], "not a cluster name"),
    (["any"], "'any' is not a cluster"),
    (["dev2", "ALL"], "'ALL' is not a cluster"),
    ([f"c{i}" for i in range(MAX_TENANT_CLUSTERS + 1)], f"at most {MAX_TENANT_CLUSTERS} clusters"),
])  # fmt: skip
def test_bad_lists_are_refused_and_nothing_is_written(database: Database, names: list[str], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        _set(database, names)
    with database.session() as session:
        assert session.get(Tenant, "tenant-a") is None


def test_only_an_admin_confines_a_tenant(database: Database) -> None:
    with pytest.raises(Forbidden, match="only an admin"):
        _set(database, ["dev2"], who=ALICE)
    assert _stored(database) is None


def test_changes_are_audited_with_the_new_list(database: Database) -> None:
    _set(database, ["dev2"])
    _set(database, None, guaranteed={"a100": 2})  # no clusters given: none in the line
    _set(database, [])
    with database.session() as session:
        lines = [e for e in reversed(audit.read(session, limit=10)) if e.action == "tenant.set"]
    assert [line.detail.get("clusters", "absent") for line in lines] == [["dev2"], "absent", None]
    assert {(line.actor, line.tenant) for line in lines} == {(ADMIN.name, "tenant-a")}

"""Drained clusters (migration 0018, issue 26): drain and resume are idempotent and audited; names and reasons checked first."""

from __future__ import annotations

import pytest
from sqlalchemy import func, inspect, select

from meta.model.errors import InvalidRequest
from meta.store import audit, cluster_drains
from meta.store.db import Database
from meta.store.models import AuditEvent, ClusterDrain


def _drain(db: Database, cluster: str, reason: str | None = None, actor: str = "root") -> tuple[cluster_drains.Drain, bool]:
    with db.session() as session:
        return cluster_drains.drain(session, cluster, reason, actor=actor, uid=0)


def _resume(db: Database, cluster: str) -> cluster_drains.Drain | None:
    with db.session() as session:
        return cluster_drains.resume(session, cluster, actor="oscar", uid=2005)


def _lines(db: Database) -> list[audit.AuditView]:
    with db.session() as session:
        return list(reversed(audit.read(session)))  # oldest first


def test_a_drain_is_stored_listed_and_audited(database: Database) -> None:
    found, new = _drain(database, "dev2", "  switch firmware  ")
    assert new and (found.cluster, found.reason, found.drained_by) == ("dev2", "switch firmware", "root")
    _drain(database, "emu")
    with database.session() as session:
        assert [d.cluster for d in cluster_drains.drains(session)] == ["dev2", "emu"]
        assert cluster_drains.drained_clusters(session) == frozenset({"dev2", "emu"})
    first = _lines(database)[0]
    assert (first.actor, first.action, first.subject, first.tenant) == ("root", "cluster.drain", "cluster:dev2", None)
    assert first.detail == {"reason": "switch firmware", "already": False, "uid": 0}
    assert found.to_dict()["drained_at"] == found.drained_at.isoformat()


def test_draining_again_keeps_the_first_drain_and_takes_a_new_reason(database: Database) -> None:
    first, _ = _drain(database, "dev2", "switch firmware", actor="root")
    again, new = _drain(database, "dev2", actor="oscar")  # no reason: the stored one stays
    assert not new and again == first
    latest, new = _drain(database, "dev2", "firmware and cabling", actor="oscar")
    assert not new and (latest.reason, latest.drained_by, latest.drained_at) == (
        "firmware and cabling", "root", first.drained_at)
    assert [(line.actor, line.detail["already"]) for line in _lines(database)] == [
        ("root", False), ("oscar", True), ("oscar", True)]


def test_resume_ends_the_drain_once_and_says_what_it_ended(database: Database) -> None:
    first, _ = _drain(database, "dev2", "switch firmware")
    assert _resume(database, "dev2") == first
    assert _resume(database, "dev2") is None  # not drained: nothing changes, still on the record
    with database.session() as session:
        assert cluster_drains.drained_clusters(session) == frozenset()
    resumed = [line for line in _lines(database) if line.action == "cluster.resume"]
    assert [line.detail["was_drained"] for line in resumed] == [True, False]
    assert resumed[0].actor == "oscar" and resumed[0].detail["reason"] == "switch firmware"
    assert resumed[0].detail["drained_by"] == "root" and resumed[0].detail["uid"] == 2005


@pytest.mark.parametrize(
    ("cluster", "reason", "words"),
    [
        ("", None, "not a cluster name"),
        ("dev/2", None, "not a cluster name"),
        ("x" * 21, None, "not a cluster name"),
        ("dev 2", None, "not a cluster name"),
        ("dev2", "x" * 201, "at most 200 printable"),
        ("dev2", "line one\nline two", "at most 200 printable"),
        ("dev2", "bell\x07", "at most 200 printable"),
        ("dev2", "nul\x00", "at most 200 printable"),
    ],
)
def test_a_bad_name_or_reason_is_refused_before_anything_is_written(
    database: Database, cluster: str, reason: str | None, words: str
) -> None:
    with pytest.raises(InvalidRequest, match=words):
        _drain(database, cluster, reason)
    if reason is None:
        with pytest.raises(InvalidRequest, match=words):
            _resume(database, cluster)
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(ClusterDrain)) == 0
        assert session.scalar(select(func.count()).select_from(AuditEvent)) == 0


def test_a_reason_of_200_characters_and_none_at_all_are_kept(database: Database) -> None:
    assert _drain(database, "a", "é" * 200)[0].reason == "é" * 200
    assert _drain(database, "b")[0].reason == ""


def test_the_migrated_table_is_the_model(database: Database) -> None:
    table = ClusterDrain.__table__
    found = {column["name"]: column for column in inspect(database.engine).get_columns(table.name)}
    assert set(found) == {column.name for column in table.columns}
    assert all(found[column.name]["nullable"] == column.nullable for column in table.columns)
    assert inspect(database.engine).get_pk_constraint(table.name)["constrained_columns"] == ["cluster"]

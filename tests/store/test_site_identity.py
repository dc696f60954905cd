"""The store's site id (migration 0016, issue 26): drawn once, shared by racing replicas, renewed only when unused."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError

from meta.model.durations import utcnow
from meta.model.ids import check_site_id
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store.db import Database
from meta.store.migrate import alembic_config, upgrade
from meta.store.models import Attempt, LeaderLease, SiteIdentity
from meta.store.site import SiteInUse, ensure_site_id, renew_site_id, stored_site_id
from tests.runtime.support import place, submit, training


@pytest.fixture
def fresh(database: Database) -> Database:
    """fresh is a migrated store without a site id yet (truncate_all keeps it on purpose: drop it here)."""
    with database.session() as session:
        session.execute(delete(SiteIdentity))
    return database


def test_a_store_draws_its_site_id_once(fresh: Database) -> None:
    assert stored_site_id(fresh) is None
    site = ensure_site_id(fresh)
    assert check_site_id(site) == site and len(site) == 12
    assert ensure_site_id(fresh) == stored_site_id(fresh) == site


def test_replicas_racing_to_draw_it_agree(fresh: Database) -> None:
    others = [Database(fresh.url) for _ in range(4)]
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            drawn = set(pool.map(ensure_site_id, others))
    finally:
        for db in others:
            db.dispose()
    assert len(drawn) == 1 and drawn == {stored_site_id(fresh)}


def test_a_store_has_one_site_row(fresh: Database) -> None:
    ensure_site_id(fresh)
    with pytest.raises(IntegrityError):
        with fresh.session() as session:
            session.add(SiteIdentity(id=2, site_id="second", created_at=utcnow()))


def test_renewing_is_refused_while_the_site_is_in_use(fresh: Database) -> None:
    site = ensure_site_id(fresh)
    _, (t,) = submit(Service(fresh), training())
    attempt_id = place(fresh, t, state=AttemptState.RUNNING)
    with pytest.raises(SiteInUse, match="1 attempt"):
        renew_site_id(fresh)
    assert stored_site_id(fresh) == site
    with fresh.session() as session:
        session.get(Attempt, attempt_id).state = AttemptState.SUCCEEDED.value
        now = utcnow()
        session.add(LeaderLease(name="scheduler-test", holder="head-1", epoch=1, expires_at=now + timedelta(seconds=30),
                                renewed_at=now))  # fmt: skip
    with pytest.raises(SiteInUse, match="head-1"):
        renew_site_id(fresh)
    with fresh.session() as session:
        session.execute(delete(LeaderLease))
    renewed = renew_site_id(fresh)
    assert renewed != site and stored_site_id(fresh) == renewed == ensure_site_id(fresh)


def test_a_schema_older_than_sites_has_no_site_id(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    db = Database(url)
    try:
        config = alembic_config(url)
        command.upgrade(config, "0015")
        assert stored_site_id(db) is None
        upgrade(db.engine, url)
        assert stored_site_id(db) is None  # the migration makes the table; the id is each store's, drawn at start
        assert ensure_site_id(db) == stored_site_id(db)
        command.downgrade(config, "0015")
        assert stored_site_id(db) is None
    finally:
        db.dispose()

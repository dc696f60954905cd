"""``metasched db upgrade`` draws the store's site id, ``db current`` and ``db site`` show it, ``--renew --yes`` draws anew."""

from __future__ import annotations

from pathlib import Path

from meta.store.db import Database
from meta.store.site import stored_site_id
from tests.cli.test_cli import as_json, make_runner, ok


def test_db_upgrade_draws_the_site_id_and_db_current_and_db_site_show_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.sqlite"
    run = make_runner(url)
    assert ok(run("db", "current")).rstrip().endswith("site none yet")  # an empty store: no site yet
    site = as_json(run("db", "upgrade", "--json"))["site"]
    assert as_json(run("db", "upgrade", "--json"))["site"] == site  # drawn once
    assert ok(run("db", "current")).rstrip().endswith(f", site {site}")
    assert ok(run("db", "site")).strip() == site
    assert as_json(run("db", "site", "--json")) == {"site": site, "renewed": False}
    db = Database(url)
    try:
        assert stored_site_id(db) == site
    finally:
        db.dispose()


def test_db_site_renews_only_with_yes(tmp_path: Path) -> None:
    run = make_runner(f"sqlite:///{tmp_path}/store.sqlite")
    site = as_json(run("db", "upgrade", "--json"))["site"]
    refused = run("db", "site", "--renew")
    assert refused.exit_code == 2 and "--yes" in refused.stderr and ok(run("db", "site")).strip() == site
    renewed = as_json(run("db", "site", "--renew", "--yes", "--json"))
    assert renewed["renewed"] and renewed["site"] != site
    assert ok(run("db", "site")).strip() == renewed["site"]

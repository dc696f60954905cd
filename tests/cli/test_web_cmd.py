"""``metasched web`` through a real API on a socket: the link it prints is one the service redeems, once, as the caller."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from meta.service.api import Service
from meta.service.web.auth import WebAuth, WebSettings
from meta.service.web.tokens import BadToken
from tests.api_support import running_api
from tests.cli.test_api_cli import Run, as_json, runner
from tests.conftest import sqlite_database

SETTINGS = WebSettings(key=b"w" * 32, base_url="http://127.0.0.1:9465")


@pytest.fixture
def web_run(tmp_path: Path) -> Iterator[tuple[Run, Service]]:
    """web_run runs the CLI against an API (SQLite) whose web view has a known key and address."""
    service = Service(sqlite_database(tmp_path / "web.sqlite"))
    with running_api(service, tmp_path, web=SETTINGS) as api:
        yield runner(api.address, tmp_path), service
    service.db.dispose()


def test_metasched_web_prints_a_link_the_service_redeems_once(web_run: tuple[Run, Service]) -> None:
    run, service = web_run
    link = as_json(run("web", "--json", uid=1001))
    assert link["user"] == "alice" and link["url"].startswith("http://127.0.0.1:9465/web/login?t=")
    token = parse_qs(urlsplit(link["url"]).query)["t"][0]
    auth = WebAuth(SETTINGS)
    claims = auth.redeem(service.db, token)
    assert (claims.uid, claims.user) == (1001, "alice")
    with pytest.raises(BadToken, match="used already"):
        WebAuth(SETTINGS).redeem(service.db, token)  # another replica: the audit remembers the link
    plain = run("web", uid=1002)
    assert plain.exit_code == 0 and "signs you in as bob" in plain.stdout
    assert "ssh -L 9465:127.0.0.1:9465 " in plain.stdout


def test_metasched_web_needs_the_api(tmp_path: Path, web_run: tuple[Run, Service]) -> None:
    run, _ = web_run
    refused = run("--db", f"sqlite:///{tmp_path / 'web.sqlite'}", "web")
    assert refused.exit_code == 2 and "needs the API" in refused.stderr

"""S14: a web session ends when its user logs out, and its cookie is Secure over TLS (issue 22).

Before, the session cookie was a stateless signed token valid for 8 hours whatever happened: a
copy taken from alice's browser (a shared machine, a proxy log) kept working after she logged
out. Now the cookie names a session id the server holds; logout deletes it, so the copy is
refused at once, and a restarted API (a new table, the same key file) honours no old cookie.
Through the real app (FastAPI's TestClient, the test MUNGE stand-in), on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from meta.service.api import Service
from meta.service.http import create_app
from meta.service.web.auth import COOKIE, SESSION_TTL_S, WebAuth, WebSettings
from meta.service.web.sessions import LiveSessions
from meta.service.web.tokens import BadToken
from meta.store.models import AuditEvent
from tenants.auth import Identity
from tests.api_support import ALICE, BOB, TestAuthenticator, principal_for

KEY = b"k" * 32


def _client(service: Service, tmp_path: Path, base: str) -> TestClient:
    """_client is a browser-like client of the app served at ``base`` (http or https)."""
    app = create_app(service, TestAuthenticator(), principal_for, secrets_root=tmp_path / "secrets",
                     web=WebSettings(key=KEY, base_url=base))  # fmt: skip
    return TestClient(app, base_url=base)


@pytest.fixture
def browser(service: Service, tmp_path: Path) -> Iterator[TestClient]:
    """browser is alice's browser over plain http."""
    with _client(service, tmp_path, "http://127.0.0.1:9465") as client:
        yield client


def _signed_in(client: TestClient, who: str = ALICE) -> str:
    """_signed_in opens a fresh login link in ``client`` and returns the session cookie it set."""
    link = client.post("/v1/web/link", headers={"Authorization": who})
    assert link.status_code == 200, link.text
    assert client.get(link.json()["path"]).status_code == 200
    return client.cookies[COOKIE]


def _page(client: TestClient, cookie: str) -> int:
    """_page is the status of the jobs page asked with exactly ``cookie`` (another browser holding a copy)."""
    client.cookies.clear()
    client.cookies.set(COOKIE, cookie, path="/web")
    return client.get("/web/jobs").status_code


def test_a_copied_cookie_stops_working_when_its_user_logs_out(browser: TestClient, service: Service) -> None:
    cookie = _signed_in(browser)
    other = _signed_in(browser)  # alice's second browser: its own session
    assert _page(browser, cookie) == 200 and _page(browser, other) == 200
    browser.cookies.set(COOKIE, cookie, path="/web")
    out = browser.get("/web/logout")
    assert out.status_code == 200 and f"{COOKIE}=" in out.headers["set-cookie"]
    assert _page(browser, cookie) == 401  # the copy: refused at once, not 8 hours later
    assert _page(browser, other) == 200  # logout ends that session only
    with service.db.session() as session:
        logouts = [e for e in session.query(AuditEvent).all() if e.action == "web.logout"]
    assert [(e.actor, e.subject) for e in logouts] == [("alice", "session")]
    assert cookie not in repr([(e.subject, e.detail) for e in logouts])
    assert browser.get("/web/logout").status_code == 200  # again, or without a session: harmless


def test_a_restarted_api_honours_no_old_cookie(service: Service, tmp_path: Path) -> None:
    with _client(service, tmp_path, "http://127.0.0.1:9465") as first:
        cookie = _signed_in(first)
        assert _page(first, cookie) == 200
    with _client(service, tmp_path, "http://127.0.0.1:9465") as restarted:  # same key file, new process
        assert _page(restarted, cookie) == 401


def test_the_cookie_is_secure_over_tls_only(service: Service, tmp_path: Path) -> None:
    with _client(service, tmp_path, "https://metasched.example:9465") as tls:
        link = tls.post("/v1/web/link", headers={"Authorization": BOB}).json()["path"]
        assert "; secure" in tls.get(link).headers["set-cookie"].lower()
        assert "; secure" in tls.get("/web/logout").headers["set-cookie"].lower()
    with _client(service, tmp_path, "http://127.0.0.1:9465") as plain:
        link = plain.post("/v1/web/link", headers={"Authorization": BOB}).json()["path"]
        assert (
            "secure" not in plain.get(link).headers["set-cookie"].lower()
        )  # a browser would drop it over http


def test_the_live_session_table_is_bounded_oldest_first() -> None:
    table = LiveSessions(max_per_user=3, max_sessions=5)
    for n in range(4):
        table.add(f"a{n}", 2001, expires=100.0, now=0.0)
    assert [table.alive(f"a{n}", 2001, 1.0) for n in range(4)] == [False, True, True, True]
    for n in range(3):
        table.add(f"b{n}", 2002, expires=100.0, now=0.0)
    assert len(table) == 5 and not table.alive("a1", 2001, 1.0) and table.alive("b2", 2002, 1.0)
    assert not table.alive("b2", 2001, 1.0)  # a session is its own uid's only
    assert not table.alive("b2", 2002, 100.0)  # nor past its expiry
    table.add("c", 2003, expires=200.0, now=150.0)  # expired ones go first
    assert len(table) == 1


def test_the_session_lasts_its_ttl_and_no_longer(service: Service) -> None:
    clock = [1_000.0]
    auth = WebAuth(WebSettings(key=KEY), clock=lambda: clock[0])
    claims = auth.redeem(service.db, auth.issue_link(Identity(2001, 2001, "alice"))[0])
    cookie = auth.session_token(claims)
    assert auth.identity_of(cookie).user == "alice"
    clock[0] += SESSION_TTL_S + 1
    with pytest.raises(BadToken, match="expired"):
        auth.identity_of(cookie)

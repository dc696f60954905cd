"""The web view's authentication and pages through FastAPI's TestClient (issue 16).

The login link is asked with a (test) MUNGE credential, opened once, and becomes a signed
session cookie; forged, expired, reused and tampered links and cookies are refused with the page
that says to run ``metasched web``; alice sees her jobs and gets 404 for bob's, as in the API;
the cluster map shows who holds what without naming another tenant's jobs; admins only see the
admin page, whose audit tail records the login (never the token). SQLite and PostgreSQL.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.service.http import create_app
from meta.service.web.auth import COOKIE, WebAuth, WebSettings
from meta.service.web.pages import decision_record
from meta.service.web.render import esc, table
from meta.service.web.tokens import LOGIN, Claims, sign
from meta.store.inventory import save_inventory
from meta.store.models import AuditEvent
from tenants.auth import Identity
from tenants.identity import member
from tests.api_support import ALICE, BOB, ROOT, TestAuthenticator, principal_for
from tests.runtime.support import place, share

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASE = "http://127.0.0.1:9465"
SIGN_IN = "metasched web"


@pytest.fixture
def settings() -> WebSettings:
    """settings is the web view's key and a base URL (as start_api sets it once TCP listens)."""
    return WebSettings(key=b"k" * 32, base_url=BASE, log_dir="/var/log/ms")


@pytest.fixture
def client(service: Service, settings: WebSettings, tmp_path: Path) -> Iterator[TestClient]:
    """client is a browser-like TestClient (it keeps cookies) over the app."""
    app = create_app(service, TestAuthenticator(), principal_for, secrets_root=tmp_path / "secrets", web=settings)
    with TestClient(app, base_url="http://127.0.0.1:9465") as test_client:
        yield test_client


def link_for(client: TestClient, who: str = ALICE) -> str:
    """link_for asks POST /v1/web/link as ``who`` and returns the link's path."""
    answer = client.post("/v1/web/link", headers={"Authorization": who})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["url"] == BASE + body["path"] and body["path"].startswith("/web/login?t=")
    return body["path"]


def sign_in(client: TestClient, who: str = ALICE) -> None:
    """sign_in opens a fresh link in ``client``: its cookie jar then holds the session."""
    answer = client.get(link_for(client, who))
    assert answer.status_code == 200, answer.text


def submit(service: Service, example: str, user: str, uid: int, tenant: str) -> str:
    """submit stores an example job for ``user`` and returns its short id."""
    from meta.model.spec import load_spec_text

    spec = load_spec_text((EXAMPLES / example).read_text(), example)
    # examples/infer.yaml has a deadline, a right (issue 21): the submitter's association holds its QOS
    return service.submit(spec, principal=member(user, uid, [tenant], qos=["inference-deadline"])).job.short_id


def test_link_needs_munge_and_a_tcp_address(client: TestClient, service: Service, tmp_path: Path) -> None:
    assert client.post("/v1/web/link").status_code == 401
    app = create_app(service, TestAuthenticator(), principal_for, web=WebSettings.ephemeral())
    with TestClient(app) as no_tcp:
        answer = no_tcp.post("/v1/web/link", headers={"Authorization": ALICE})
    assert answer.status_code == 400 and "--api-listen" in answer.json()["message"]


def test_login_sets_a_strict_httponly_cookie_and_is_audited_without_the_token(
    client: TestClient, service: Service
) -> None:
    path = link_for(client)
    answer = client.get(path)
    assert answer.status_code == 200 and "Signed in as alice" in answer.text
    cookie = answer.headers["set-cookie"]
    assert f"{COOKIE}=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/web" in cookie
    assert "Max-Age=28800" in cookie
    assert answer.headers["referrer-policy"] == "no-referrer" and "script-src" not in answer.headers["content-security-policy"]
    token = path.split("t=", 1)[1]
    with service.db.session() as session:
        events = [e for e in session.query(AuditEvent).all() if e.action == "web.login"]
    assert len(events) == 1 and events[0].actor == "alice" and events[0].detail == {"uid": 1001}
    assert token not in json.dumps([events[0].subject, events[0].detail]) and events[0].subject.startswith("link:")
    assert client.get("/web/").status_code == 200


def test_a_link_works_once(client: TestClient) -> None:
    path = link_for(client)
    assert client.get(path).status_code == 200
    client.cookies.clear()
    again = client.get(path)
    assert again.status_code == 401 and "used already" in again.text and SIGN_IN in again.text
    assert COOKIE not in again.headers.get("set-cookie", "")


def test_forged_altered_and_expired_links_are_refused(client: TestClient, settings: WebSettings) -> None:
    token = link_for(client).split("t=", 1)[1]
    body, mac = token.split(".")
    flipped = mac[:-2] + ("A" if mac[-2] != "A" else "B") + mac[-1]
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    as_bob = base64.urlsafe_b64encode(json.dumps({**claims, "uid": 1002, "user": "bob"}).encode()).rstrip(b"=").decode()
    other_key = sign(b"x" * 32, Claims(**claims))
    expired = WebAuth(settings, clock=lambda: 0.0).issue_link(Identity(1001, 1001, "alice"))[0]
    for bad, why in ((f"{body}.{flipped}", "invalid signature"), (f"{as_bob}.{mac}", "invalid signature"),
                     (other_key, "invalid signature"), (expired, "expired"), ("nonsense", "malformed"), ("", "malformed")):
        answer = client.get(f"/web/login?t={bad}")
        assert answer.status_code == 401 and why in answer.text and SIGN_IN in answer.text, (bad, answer.text)
        assert "set-cookie" not in answer.headers
    assert client.get(f"/web/login?t={token}").status_code == 200  # the real one still works, once


def test_pages_without_a_valid_cookie_say_to_run_metasched_web(client: TestClient, settings: WebSettings) -> None:
    for path in ("/web/", "/web/queues", "/web/jobs", "/web/jobs/jxxxx", "/web/admin"):
        answer = client.get(path)
        assert answer.status_code == 401 and SIGN_IN in answer.text and "alice" not in answer.text, path
    sign_in(client)
    good = client.cookies[COOKIE]
    body, mac = good.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    as_root = base64.urlsafe_b64encode(json.dumps({**claims, "uid": 0, "user": "root"}).encode()).rstrip(b"=").decode()
    login_token = sign(settings.key, Claims(**{**claims, "purpose": LOGIN}))  # right key, wrong purpose
    for bad in (f"{as_root}.{mac}", f"{body}.{mac[::-1]}", login_token, "x"):
        client.cookies.clear()
        client.cookies.set(COOKIE, bad, path="/web")
        answer = client.get("/web/admin")
        assert answer.status_code == 401 and SIGN_IN in answer.text, bad
    client.cookies.clear()
    client.cookies.set(COOKIE, good, path="/web")
    assert client.get("/web/jobs").status_code == 200


def test_alice_sees_her_jobs_and_gets_404_for_bobs(client: TestClient, service: Service) -> None:
    alices = submit(service, "train.yaml", "alice", 1001, "tenant-a")
    bobs = submit(service, "infer.yaml", "bob", 1002, "tenant-b")
    sign_in(client, ALICE)
    mine = client.get(f"/web/jobs/{alices}")
    assert mine.status_code == 200 and alices in mine.text and "Why it waits" in mine.text
    assert "Decision record" in mine.text and f"metasched explain {alices} --history" in mine.text
    theirs = client.get(f"/web/jobs/{bobs}")
    assert theirs.status_code == 404 and bobs in theirs.text and "tenant-b" not in theirs.text
    listing = client.get("/web/jobs").text
    assert alices in listing and bobs not in listing
    assert client.get("/web/admin").status_code == 403
    client.cookies.clear()
    sign_in(client, BOB)
    assert client.get(f"/web/jobs/{alices}").status_code == 404 and client.get(f"/web/jobs/{bobs}").status_code == 200


def test_cluster_map_shows_holders_but_not_other_tenants_jobs(client: TestClient, service: Service) -> None:
    nodes = [NodeState(f"a100-{i}", ResourceVector(cpus=64, memory=512000, gpus=8, gpu_type="a100"), ("gpu",), "leaf1")
             for i in (1, 2)]  # fmt: skip
    with service.db.session() as session:
        save_inventory(session, nodes, 1, {"leaf1": "spine"})
    bobs = submit(service, "infer.yaml", "bob", 1002, "tenant-b")
    place(service.db, service.status(bobs).tasks[0].id, [share("a100-1", gpus=4)], AttemptState.RUNNING)
    alices = submit(service, "train.yaml", "alice", 1001, "tenant-a")
    place(service.db, service.status(alices).tasks[0].id, [share("a100-2", gpus=2)], AttemptState.RUNNING)
    sign_in(client, ALICE)
    page = client.get("/web/").text
    assert "a100-1" in page and "a100-2" in page and "leaf1" in page and "spine" in page
    assert "4/8 held" in page and "2/8 held" in page and "tenant-b" in page
    assert alices in page and bobs not in page
    client.cookies.clear()
    sign_in(client, ROOT)
    assert bobs in client.get("/web/").text
    queues = client.get("/web/queues").text
    assert "tenant-a" in queues and "tenant-b" in queues and "<svg" in queues
    admin = client.get("/web/admin")
    assert admin.status_code == 200 and "web.login" in admin.text and "Audit trail" in admin.text


def test_decision_record_links_only_jobs_the_caller_may_open() -> None:
    history = {"job": "jmine", "tenant": "tenant-a", "waiting": True, "since": "2026-12-03T10:00:00", "until": None,
               "placed_while_waiting": 7, "touching": [],
               "ran_before": [{"cycle": 3, "at": "2026-12-03T10:01:00", "job": "jtheirs", "tenant": "tenant-b",
                               "why": "lower usage share", "backfilled": False},
                              {"cycle": 4, "at": "2026-12-03T10:02:00", "job": "jours", "tenant": "tenant-a",
                               "why": "older", "backfilled": True}]}  # fmt: skip
    record = decision_record(history, frozenset({"tenant-a"}))
    assert "7 other placements" in record and "lower usage share" in record and "backfilled" in record
    assert 'href="/web/jobs/jours"' in record and "jtheirs" in record and 'href="/web/jobs/jtheirs"' not in record
    assert 'href="/web/jobs/jtheirs"' in decision_record(history, None)  # an admin opens every job


def test_every_value_is_escaped() -> None:
    cell = esc("<script>alert(1)</script>\"'")
    assert "<script>" not in table(["h<"], [[cell]]) and "&lt;script&gt;" in cell and "&quot;" in cell

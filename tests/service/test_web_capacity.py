"""The web view's Capacity page (issue 23): the latest calibration and the saved scenarios with their figures and plots,
scoped as the API's ``plan_report`` — an admin everything, a tenant's coordinator its own rows and the cluster-wide
figures and plot, a plain member 403 — and linked from the navigation only for those who may open it."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from meta.model.durations import utcnow
from meta.service.api import Service
from meta.service.http import create_app
from meta.service.web.auth import WebSettings
from meta.service.web.pages import capacity_body
from meta.store.db import Database
from tests.api_support import TestAuthenticator
from tests.plan_support import ACME_COORD, ADMIN, BETA_COORD, MEMBER, congested_store, planners, saved_reports

BASE = "http://127.0.0.1:9465"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, int]]:
    """store is the congested history (acme, beta) with a what-if, a calibration and a need search saved."""
    url = congested_store(tmp_path_factory.mktemp("web") / "store.sqlite",
                          (utcnow() - timedelta(days=1)).replace(microsecond=0))
    return url, saved_reports(url)


@pytest.fixture
def app(store: tuple[str, dict[str, int]], tmp_path: Path) -> Iterator[object]:
    service = Service(Database(store[0]))
    try:
        yield create_app(service, TestAuthenticator(), planners, secrets_root=tmp_path / "secrets",
                         web=WebSettings(key=b"k" * 32, base_url=BASE))
    finally:
        service.db.dispose()


def browser(app: object, uid: int) -> TestClient:
    """browser is a TestClient signed in as ``uid`` (a login link asked with its test credential, then opened)."""
    client = TestClient(app, base_url=BASE)  # type: ignore[arg-type]
    answer = client.post("/v1/web/link", headers={"Authorization": f"TEST uid={uid}"})
    assert answer.status_code == 200, answer.text
    assert client.get(answer.json()["path"]).status_code == 200
    return client


def _images(html: str) -> list[str]:
    return re.findall(r'<img class="plot" alt="([^"]+)" src="data:image/png;base64,', html)


def test_an_admin_sees_every_report_with_every_plot(app: object, store: tuple[str, dict[str, int]]) -> None:
    page = browser(app, ADMIN).get("/web/capacity")
    assert page.status_code == 200 and "img-src data:" in page.headers["Content-Security-Policy"]
    html = page.text
    assert '<a href="/web/capacity" class="on">Capacity</a>' in html
    for heading in ("Latest calibration", "Saved scenarios", "Node searches"):
        assert heading in html
    assert "acme mean delay" in html and "beta p95 delay" in html and "overall mean delay" in html
    assert "GPU utilization" in html and "stranded GPUs" in html and "calibration error" in html
    assert sorted(_images(html)) == ["queue_delay_by_tenant.png", "queue_delay_by_tenant.png",
                                     "utilization.png", "utilization.png"]
    encoded = re.search(r'src="data:image/png;base64,([^"]+)"', html)
    assert encoded and base64.b64decode(encoded.group(1)).startswith(b"\x89PNG")
    one = browser(app, ADMIN).get(f"/web/capacity/{store[1]['what-if']}")
    assert one.status_code == 200 and "--add-nodes a100:8x1" in one.text and len(_images(one.text)) == 2


def test_a_coordinator_sees_its_tenants_rows_and_the_utilization_plot_only(app: object) -> None:
    html = browser(app, ACME_COORD).get("/web/capacity").text
    assert "Capacity</a>" in html and "/web/admin" not in html
    assert "acme mean delay" in html and "GPU utilization" in html
    assert "beta" not in html and "overall mean delay" not in html and "verdict" not in html
    assert _images(html) == ["utilization.png", "utilization.png"]
    other = browser(app, BETA_COORD).get("/web/capacity").text
    assert "beta mean delay" in other and "acme" not in other


def test_a_plain_member_gets_403_and_no_link(app: object, store: tuple[str, dict[str, int]]) -> None:
    client = browser(app, MEMBER)
    assert "/web/capacity" not in client.get("/web/jobs").text
    for path in ("/web/capacity", f"/web/capacity/{store[1]['calibrate']}"):
        page = client.get(path)
        assert page.status_code == 403 and "coordinators" in page.text and "acme mean delay" not in page.text
    assert browser(app, ADMIN).get("/web/capacity/999999").status_code == 404


def test_the_page_says_what_to_run_when_nothing_is_saved() -> None:
    html = capacity_body([], ["acme"])
    assert "no calibration saved yet" in html and "plan calibrate --since 14d --save" in html
    assert "the tenants you coordinate" in html


def test_names_are_escaped() -> None:
    report = {"id": 1, "kind": "what-if", "name": "<script>x</script>", "saved_at": "2026-03-02T08:00:00+00:00",
              "context": {}, "plots": [], "figures": {"runs": ["today", "<b>"], "tenants": [], "changes": [["--share <i>=2"]]}}
    html = capacity_body([report], "all")
    assert "<script>" not in html and "&lt;script&gt;" in html and "<b>" not in html and "<i>" not in html

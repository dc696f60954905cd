"""S9: a refusal flood cannot drown the audit, and an admin may prune it by age — explicitly, on the record (issue 22).

Through the real ``metasched serve`` (PostgreSQL, MUNGE, the dev cluster's associations), with a
3-second refusal window (``METASCHED_REFUSAL_WINDOW_S``) so the test need not wait a minute:
mallory (uid 2006, no Slurm association) sends 300 job-side commits for an attempt that does not
exist, each with a fresh MUNGE credential of hers, from her own process. Before the fix each was
one audit row (323/s); now 5 are written in full and, once the window closes, one
``audit.refusals`` summary row counts all 300 — and oscar (Operator) sees it with ``metasched
audit``. Then ``audit prune``: alice is refused (and that refusal is audited), oscar without
``--yes`` changes nothing, oscar with ``--yes`` prunes and leaves an ``audit.prune`` row.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from meta.model.durations import utcnow
from meta.service.refusal_audit import FULL_ENV, SUMMARY_ACTION, WINDOW_ENV
from meta.store import audit
from meta.store.models import AuditEvent
from tenants.credential import request_payload
from tests.identity.conftest import Served
from tests.identity.users import Call, run_all

pytestmark = [pytest.mark.slurm, pytest.mark.postgres]

SENDER = Path(__file__).with_name("sender.py")
WINDOW_S, IN_FULL, FLOOD = 3, 5, 300
TARGET = "/v1/attempts/a-forged-attempt/commit"
BODY = '{"token": 1, "manifest": {"files": []}}'


@pytest.fixture
def short_window(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """short_window gives the service started next a 3-second refusal window, 5 rows in full (its environment)."""
    monkeypatch.setenv(WINDOW_ENV, str(WINDOW_S))
    monkeypatch.setenv(FULL_ENV, str(IN_FULL))
    yield


def _mallorys_credentials(folder: Path, count: int) -> Path:
    """_mallorys_credentials are ``count`` MUNGE credentials of mallory for the flood's request, one a line."""
    payload = folder / "payload"
    payload.write_bytes(request_payload("POST", TARGET, BODY.encode()))
    payload.chmod(0o644)
    script = f"i=0; while [ $i -lt {count} ]; do munge --input={payload}; echo; i=$((i+1)); done"
    done = subprocess.run(["runuser", "-u", "mallory", "--", "sh", "-c", script], capture_output=True, text=True,
                          timeout=300, check=True)  # fmt: skip
    out = folder / "credentials"
    out.write_text(done.stdout)
    out.chmod(0o644)
    assert len(done.stdout.split()) == count
    return out


def _lines(served: Served, actor: str, action: str) -> list[audit.AuditView]:
    with served.service.db.session() as session:
        return [e for e in audit.read(session, limit=100_000) if e.actor == actor and e.action == action]


def test_a_refusal_flood_writes_five_rows_and_a_summary(short_window: None, served: Served) -> None:
    credentials = _mallorys_credentials(served.folder, FLOOD)
    argv = ["runuser", "-u", "mallory", "--", "/usr/bin/python3", str(SENDER), str(served.socket), TARGET,
            "--method", "POST", "--body", BODY, "--credentials", str(credentials)]  # fmt: skip
    answer = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True).stdout)
    assert answer["statuses"] == {"404": FLOOD}, answer  # every one refused, as "not found"
    rate = FLOOD / answer["seconds"]
    assert len(_lines(served, "mallory", "output.commit.refused")) == IN_FULL, f"{rate:.0f} refusals/s"
    deadline = time.monotonic() + WINDOW_S + 10
    while not _lines(served, "mallory", SUMMARY_ACTION) and time.monotonic() < deadline:
        time.sleep(0.2)
    (summary,) = _lines(served, "mallory", SUMMARY_ACTION)
    assert summary.detail["refused"] == FLOOD and summary.detail["counted_only"] == FLOOD - IN_FULL
    assert (
        summary.detail["refused_action"] == "output.commit.refused" and summary.detail["kind"] == "NotFound"
    )
    print(f"S9: {FLOOD} refusals at {rate:.0f}/s -> {IN_FULL} rows in full + 1 summary row")
    (shown,) = run_all([Call("oscar", ("audit", "--json", "--limit", "20"))], served.api, served.folder)
    assert shown.code == 0, shown.stderr
    assert any(e["action"] == SUMMARY_ACTION and e["actor"] == "mallory" for e in shown.json()), shown.stdout


def test_only_an_admin_prunes_and_only_with_yes(served: Served) -> None:
    with served.service.db.session() as session:
        for days in (400, 100, 2):
            session.add(AuditEvent(at=utcnow() - timedelta(days=days), actor="t", action=f"old{days}", tenant=None,
                                   subject="s", detail={}))  # fmt: skip
    alice, unconfirmed = run_all([
        Call("alice", ("audit", "prune", "--before", "90d", "--yes")),
        Call("oscar", ("audit", "prune", "--before", "90d")),
    ], served.api, served.folder, workers=1)  # fmt: skip
    assert alice.code == 1 and "only an admin" in alice.stderr, alice
    assert unconfirmed.code == 2 and "--yes" in unconfirmed.stderr, unconfirmed
    assert len(_lines(served, "t", "old400")) == 1  # nothing pruned yet
    assert _lines(served, "alice", "request.refused")  # the refused prune is on the record
    (pruned,) = run_all([Call("oscar", ("audit", "prune", "--before", "90d", "--yes", "--json"))],
                        served.api, served.folder)  # fmt: skip
    assert pruned.code == 0, pruned.stderr
    assert pruned.json()["deleted"] == 2  # the 400- and 100-day-old lines
    assert not _lines(served, "t", "old400") and _lines(served, "t", "old2")
    (line,) = _lines(served, "oscar", audit.PRUNE_ACTION)
    assert line.detail["deleted"] == 2 and line.detail["asked"] == "90d"

"""Fuzz the HTTP API: hostile methods, paths, query strings, headers and bodies against the real app.

Each case is one request to the service's ASGI app (``meta.service.http.create_app``, through
FastAPI's TestClient, on the fuzz module's SQLite store) built from the operation table
(``meta.model.api_operations``) and then bent: invented methods, path segments of hostile text,
unknown and repeated query keys, hostile header values, bodies of random bytes, deep JSON or a
real operation's body with hostile field values. The contract of every answer: never a 5xx,
within the per-case time bound, and an error (4xx) is the documented JSON shape
``{"error": ..., "message": one line}`` (docs/identity.md §2).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from meta.model.api_operations import OPERATIONS, Operation
from meta.service.api import Service
from meta.service.http import create_app
from tests.api_support import ALICE, BOB, ROOT, TestAuthenticator, principal_for
from tests.fuzz.conftest import CASES, MAX_CASE_S, Figures, figures
from tests.fuzz.grammar import hostile

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE")
# who calls: admin, two members, nobody, and credentials that are not credentials
CALLERS = (ROOT, ALICE, BOB, None, "", "TEST uid=-1", "TEST uid=99999999999999999999", "MUNGE x", "TEST uid=0\x00",
           "Bearer " + "a" * 5000)
CONTENT_TYPES = ("application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                 "application/json; charset=latin-1", "", "application/json\x00")


@pytest.fixture(scope="module")
def api(fuzz_service: Service, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """api is the service's app over the fuzz store, seeded with jobs so that real references resolve."""
    app = create_app(fuzz_service, TestAuthenticator(), principal_for,
                     secrets_root=tmp_path_factory.mktemp("fuzz-secrets"))
    with TestClient(app, raise_server_exceptions=False) as client:
        for example, caller in (("train.yaml", ROOT), ("infer.yaml", ROOT), ("eval.yaml", ROOT)):
            path = EXAMPLES / example
            if path.exists():
                client.post("/v1/jobs", headers={"Authorization": caller}, json={"spec_text": path.read_text()})
        yield client


def _job_refs(api: TestClient) -> list[str]:
    """_job_refs are the ids of the seeded jobs (the fuzz's path arguments mix them with hostile text)."""
    answer = api.get("/v1/jobs", headers={"Authorization": ROOT})
    assert answer.status_code == 200, answer.text
    refs = [row["id"] for row in answer.json()]
    assert refs, "the seed jobs were not stored"
    return refs


def segment(refs: list[str]) -> st.SearchStrategy[str]:
    """segment is a path argument: a real job id, a tenant name, or hostile text (percent-encoded)."""
    plain = st.sampled_from([*refs, "tenant-a", "tenant-b", "j1", "a1", "WANDB_API_KEY", "x" * 300, "..", "%00"])
    wild = st.text(max_size=60).map(lambda s: quote(s.encode("utf-8", "surrogatepass"), safe=""))
    return st.one_of(plain, plain, wild)


@st.composite
def request(draw: st.DrawFn, refs: list[str]) -> dict[str, Any]:
    """request is one hostile request: method, target, headers and body."""
    op: Operation = draw(st.sampled_from(OPERATIONS))
    path = op.path
    for arg in op.of("path"):
        path = path.replace("{" + arg.key + "}", draw(segment(refs)))
    if draw(st.integers(0, 9)) == 0:
        path = draw(st.sampled_from(("/", "/v1", "/v2/jobs", "/v1/jobs/", "//v1//jobs", "/metrics", "/docs",
                                     "/openapi.json", "/v1/" + "a/" * 200, "/web", "/web/logout")))
    method = draw(st.one_of(st.just(op.method), st.just(op.method), st.sampled_from(METHODS),
                            st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=20)))
    query = draw(st.lists(st.tuples(st.sampled_from([a.key for a in op.of("query")] + ["as_tenant", "limit", "x"]),
                                    st.one_of(st.text(max_size=30), st.sampled_from(("-1", "0", "1e400", "NaN",
                                                                                     "99999999999999999999")))),
                          max_size=4))
    headers = {}
    caller = draw(st.one_of(st.sampled_from(CALLERS[:3]), st.sampled_from(CALLERS)))  # mostly real callers
    if caller is not None:
        headers["Authorization"] = caller
    if draw(st.booleans()):
        headers["Content-Type"] = draw(st.sampled_from(CONTENT_TYPES))
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(("X-Metasched-Attempt-Secret", "X-Forwarded-For", "Cookie", "Accept", "X-A")))
        headers[name] = draw(st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=200))
    return {"method": method, "url": path, "params": query, "headers": headers, "content": draw(body(op))}


# well-formed bodies of the operations that take numbers and nested settings; one leaf is made hostile
TEMPLATES: dict[str, dict[str, Any]] = {
    "set_tenant": {"weight": 1.0, "guaranteed": {"gpu": 8}, "limits": {"gpu": 16},
                   "submit": {"max_pending": 10, "max_pending_per_user": 5, "rate": 1.0, "burst": 5},
                   "priority_classes": ["training"], "clusters": ["dev2"]},
    "retry": {"task": 0},
    "drain_cluster": {"reason": "switch firmware"},
    "report_checkpoint": {"token": 1, "step": 10, "path": "/ckpt/1", "size_bytes": 1024, "duration_s": 2.0,
                          "secret": "x"},
    "commit": {"token": 1, "manifest": {"files": [{"path": "a", "size": 1, "sha256": "0" * 64}]}, "secret": "x"},
    "submit": {"spec": {"name": "j", "tenant": "tenant-a", "kind": "evaluation", "command": ["true"]}},
}


@st.composite
def templated(draw: st.DrawFn, op: Operation) -> Any:
    """templated is the operation's well-formed body with one leaf (at any depth) made hostile."""
    value = json.loads(json.dumps(TEMPLATES.get(op.name, {"x": 1})))
    holder, key = value, draw(st.sampled_from(sorted(value)))
    while isinstance(holder[key], dict) and draw(st.booleans()):
        holder, key = holder[key], draw(st.sampled_from(sorted(holder[key])))
    holder[key] = draw(st.one_of(hostile(), st.sampled_from((float("nan"), float("inf"), -float("inf"), 1e308, 2**64))))
    return value


def body(op: Operation) -> st.SearchStrategy[bytes]:
    """body is nothing, random bytes, deep JSON, or the operation's own fields with hostile values."""
    fields = [a.key for a in op.of("body")] or ["spec_text"]
    own = st.dictionaries(st.sampled_from(fields + ["tenant", "extra"]), hostile(), max_size=len(fields) + 1)
    big = st.just(b'{"weight": 1e400, "submit": {"max_pending": 1e400}}')
    as_json = st.one_of(own, templated(op), templated(op), hostile()).map(
        lambda v: json.dumps(v, allow_nan=True, default=str).encode())
    as_json = st.one_of(as_json, big)
    deep = st.integers(1, 5000).map(lambda n: ("[" * n + "]" * n).encode())
    return st.one_of(st.just(b""), st.binary(max_size=300), as_json, as_json, deep)


def _broken_rule(response: Any, elapsed: float) -> str | None:
    """_broken_rule names the first rule an answer broke, or None."""
    if response.status_code >= 500:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    if elapsed > MAX_CASE_S:
        return f"took {elapsed:.2f} s (> {MAX_CASE_S} s)"
    json_error = response.headers.get("content-type", "").startswith("application/json") and response.content
    if response.status_code >= 400 and json_error:  # a HEAD answer has the headers and no body
        answer = response.json()
        message = answer.get("message") if isinstance(answer, dict) else None
        if not isinstance(message, str) or "\n" in message or "error" not in answer:
            return f"HTTP {response.status_code} without the error shape: {response.text[:300]}"
    return None


def _send(api: TestClient, case: dict[str, Any], tally: Figures) -> None:
    """_send sends one case and records it; a broken rule is a finding and fails the case."""
    start = time.perf_counter()
    try:
        response = api.request(**case)
    except Exception as exc:  # the client refusing to send (an invalid method or header) is not the server's
        if type(exc).__name__ in {"LocalProtocolError", "InvalidURL", "UnicodeEncodeError", "ValueError"}:
            tally.refused += 1
            return
        raise
    elapsed = time.perf_counter() - start
    tally.cases += 1
    if elapsed > tally.max_seconds:
        tally.max_seconds, tally.slowest = elapsed, f"{case['method']} {case['url'][:100]}"
    problem = _broken_rule(response, elapsed)
    if problem:
        tally.findings.append(f"{case['method']} {case['url'][:80]}: {problem}")
        raise AssertionError(f"{problem}\n--- case ---\n{repr(case)[:2000]}")
    if response.status_code < 400:
        tally.accepted += 1
    else:
        tally.refused += 1


@pytest.fixture(scope="module")
def refs(api: TestClient) -> list[str]:
    """refs are the seeded jobs' ids."""
    return _job_refs(api)


def test_every_api_answer_is_4xx_or_success_never_5xx(api: TestClient, refs: list[str]) -> None:
    """CASES['api'] hostile requests: no 5xx, no hang, errors in the documented shape."""
    tally = figures("API requests (HTTP)")

    @settings(settings.get_profile("fuzz"), max_examples=CASES["api"])
    @given(case=request(refs))
    def one(case: dict[str, Any]) -> None:
        _send(api, case, tally)

    one()
    assert tally.cases >= CASES["api"] * 0.9, f"only {tally.cases} requests were sent"


def test_the_api_fuzz_notices_a_5xx() -> None:
    """A 500 answer is a finding: the API harness can fail (it is not a rubber stamp)."""

    class Answer:
        status_code, text, headers = 500, "boom", {}

    assert _broken_rule(Answer(), 0.01) == "HTTP 500: boom"

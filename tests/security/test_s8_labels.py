"""S8: no request adds metric series — 10,000 invented method names from an unauthenticated local user (issue 22).

The production API (``meta.serve.api_start.start_api``: MUNGE, Slurm's associations, the API's
metrics on a registry this test reads) on a Unix socket every user reaches; mallory (uid 2006, no
Slurm association, no credential) sends 10,000 requests whose methods are invented words, half
to a real route and half to invented paths. Before the fix each method was a label value (170,503
series); now the label set is fixed: the sample count does not move, and the requests are
counted under ``method="other"``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from meta.serve.api_start import start_api
from meta.service.server import ApiServer, Listen
from meta.store.db import Database
from meta.store.reset import truncate_all
from tests.identity.conftest import MUNGE_SOCKET

pytestmark = [pytest.mark.slurm, pytest.mark.postgres]

SENDER = Path(__file__).with_name("sender.py")
INVENTED = 10_000


@pytest.fixture
def api(
    slurm_cluster: None, pg_database: Database, shared_folder: Path
) -> Iterator[tuple[ApiServer, CollectorRegistry]]:
    """api is the production API on a socket in a 0755 folder, its metrics on a registry of this test."""
    truncate_all(pg_database)
    registry = CollectorRegistry()
    server = start_api(pg_database.url, Listen(socket_path=shared_folder / "run" / "api.sock"),
                       secrets_root=str(shared_folder / "secrets"), slurm_bin_dir=None,
                       munge_socket=str(MUNGE_SOCKET), registry=registry)  # fmt: skip
    try:
        yield server, registry
    finally:
        server.stop()


def _as_mallory(sock: Path, target: str, *args: str) -> dict:
    argv = ["runuser", "-u", "mallory", "--", "/usr/bin/python3", str(SENDER), str(sock), target, *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout)


def _samples(registry: CollectorRegistry) -> int:
    return sum(len(family.samples) for family in registry.collect())


def _value(registry: CollectorRegistry, **labels: str) -> float:
    return registry.get_sample_value("metasched_api_requests_total", labels) or 0.0


def test_invented_methods_add_no_series(api: tuple[ApiServer, CollectorRegistry]) -> None:
    server, registry = api
    sock = Path(server.addresses()[0].removeprefix("unix://"))
    for target in ("/v1/jobs", "/nowhere"):  # the two label sets the flood reaches, once each
        assert _as_mallory(sock, target, "--methods", "WARMUP")["statuses"]
    before = _samples(registry)
    half = str(INVENTED // 2)
    answers = [
        _as_mallory(sock, target, "--methods", "BREW", "--count", half) for target in ("/v1/jobs", "/x/y")
    ]
    for answer in answers:
        assert set(answer["statuses"]) <= {"401", "404", "405"}, answer  # refused, never a 5xx, never a hang
        assert sum(answer["statuses"].values()) == INVENTED // 2
    assert _samples(registry) == before  # not one series more
    assert _value(registry, method="other", route="/v1/jobs", status="4xx") == INVENTED // 2 + 1
    assert _value(registry, method="other", route="unmatched", status="4xx") == INVENTED // 2 + 1
    methods = {s.labels["method"] for f in registry.collect() for s in f.samples if "method" in s.labels}
    assert methods == {"other"}

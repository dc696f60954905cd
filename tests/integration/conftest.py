"""Fixtures for daemon tests against the real dev Slurm cluster and PostgreSQL (see tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from meta.service.api import Service
from tests.harness import DaemonHarness
from tests.integration.two_cluster_support import daemon_over_pair


@pytest.fixture
def harness(slurm_exclusive: None, pg_service, tmp_path: Path) -> Iterator[DaemonHarness]:
    """harness is an in-process daemon over a fresh PostgreSQL store and the real Slurm cluster."""
    h = DaemonHarness(pg_service, tmp_path)
    yield h
    h.close()


@pytest.fixture
def two_clusters(slurm_exclusive: None, pg_service: Service, tmp_path: Path) -> Iterator[DaemonHarness]:
    """two_clusters is an in-process daemon over emu and dev2 (issue 26); whatever a test leaves in dev2 is cancelled."""
    with daemon_over_pair(pg_service, tmp_path) as harness:
        yield harness

"""Fixtures for daemon tests against the real dev Slurm cluster and PostgreSQL (see tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import DaemonHarness


@pytest.fixture
def harness(slurm_exclusive: None, pg_service, tmp_path: Path) -> Iterator[DaemonHarness]:
    """harness is an in-process daemon over a fresh PostgreSQL store and the real Slurm cluster."""
    h = DaemonHarness(pg_service, tmp_path)
    yield h
    h.close()

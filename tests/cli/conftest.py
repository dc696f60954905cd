"""Fixtures the CLI tests share: the API served on a socket over the store they run on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from meta.service.api import Service
from tests.api_support import RunningApi, running_api


@pytest.fixture
def api(service: Service, tmp_path: Path) -> Iterator[RunningApi]:
    """api serves the store (SQLite and PostgreSQL) on a socket in tmp_path."""
    with running_api(service, tmp_path, secrets_root=tmp_path / "secrets") as running:
        yield running

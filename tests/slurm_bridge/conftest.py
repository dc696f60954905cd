"""Shared fixtures for slurm_bridge tests: fixture files, fake Slurm binaries, the live-cluster gate."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the tests run from a checkout, without installing the package
    sys.path.insert(0, str(REPO))

from tests.cluster_gate import cluster_required, require_cluster  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "slurm"
REFERENCE = FIXTURES / "reference"
GOLDEN = REPO / "tests" / "golden" / "sbatch"


def jobs_by_name(jobs: Iterable[Any]) -> dict[str, list[Any]]:
    """jobs_by_name groups parsed squeue jobs by name, in job-id order (ids change on re-capture)."""
    grouped: dict[str, list[Any]] = {}
    for job in sorted(jobs, key=lambda j: j.job_id):
        grouped.setdefault(job.name, []).append(job)
    return grouped


def _captured(name: str) -> Path:
    """_captured is a file captured on the dev cluster, or skips if it has not been committed."""
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"captured fixture {name} not present yet (deploy/lib/capture-slurm-fixtures)")
    return path


@pytest.fixture(scope="session")
def captured() -> Callable[[str], Path]:
    """captured returns a function giving the path of a captured dev-cluster fixture."""
    return _captured


@pytest.fixture(scope="session")
def reference() -> Callable[[str], Path]:
    """reference returns a function giving the path of a reference sample."""
    return lambda name: REFERENCE / name


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    """golden_dir is tests/golden/sbatch."""
    return GOLDEN


@pytest.fixture
def fake_binary(tmp_path: Path) -> Callable[..., list[str]]:
    """fake_binary builds an argv prefix for a fake Slurm command that records its arguments."""

    def make(stdout: str = "", stderr: str = "", exit_code: int = 0, name: str = "fake") -> list[str]:
        out, err, calls = tmp_path / f"{name}.out", tmp_path / f"{name}.err", tmp_path / f"{name}.calls"
        out.write_text(stdout)
        err.write_text(stderr)
        script = tmp_path / f"{name}.py"
        script.write_text(
            textwrap.dedent(
                f"""
                import json, sys
                stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
                with open({str(calls)!r}, "a") as f:
                    f.write(json.dumps({{"argv": sys.argv[1:], "stdin": stdin}}) + "\\n")
                sys.stdout.write(open({str(out)!r}).read())
                sys.stderr.write(open({str(err)!r}).read())
                sys.exit({exit_code})
                """
            )
        )
        return [sys.executable, str(script)]

    return make


@pytest.fixture
def recorded_calls(tmp_path: Path) -> Callable[..., list[dict]]:
    """recorded_calls returns a function reading what a fake binary was called with."""

    def read(name: str = "fake") -> list[dict]:
        path = tmp_path / f"{name}.calls"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    return read


@pytest.fixture(autouse=True)
def _skip_without_slurm(request: pytest.FixtureRequest) -> None:
    """_skip_without_slurm skips slurm tests without a cluster (unless METASCHED_REQUIRE_SLURM=1)."""
    if request.node.get_closest_marker("slurm") is not None and not cluster_required():
        require_cluster()


def pytest_runtest_call(item: pytest.Item) -> None:
    """pytest_runtest_call fails slurm tests (as FAILED, not ERROR) when a cluster is required but down."""
    if item.get_closest_marker("slurm") is not None and cluster_required():
        require_cluster()

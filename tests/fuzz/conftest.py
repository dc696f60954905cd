"""The fuzz suite's harness: profiles, one shared store, per-case checks and the printed figures (CLI and API).

Profiles (``METASCHED_FUZZ_PROFILE``): ``short`` (CI, the default) and ``long`` (``deploy/fuzz-suite``:
>= 20,000 job files, >= 5,000 msbatch scripts, >= 20,000 API requests). Every case runs the real CLI entry point in this
process against one SQLite store and must end with exit 0 (stored, exactly one job more) or exit
2 (refused, one line, nothing stored); never exit 1, never a traceback, within the time and memory
bounds below. The figures of each run are printed at the end of the pytest session.
"""

from __future__ import annotations

import gc
import os
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import Result
from hypothesis import HealthCheck, settings
from sqlalchemy import func, select

from meta.service.api import Service
from meta.store.models import Job, JobSpecRow, Task
from tests.conftest import sqlite_database

PROFILE = os.environ.get("METASCHED_FUZZ_PROFILE", "short")
CASES = {
    "short": {"jobfile": 400, "msbatch": 150, "api": 300},
    "long": {"jobfile": 20_000, "msbatch": 5_000, "api": 20_000},
}[PROFILE]
MAX_CASE_S = 2.0
MAX_CASE_RSS_GROWTH = 100 * 1024 * 1024  # what one case may add to the process's peak RSS

settings.register_profile(
    "fuzz",
    deadline=None,  # time is checked by the harness, with the bound the issue sets
    suppress_health_check=list(HealthCheck),
    derandomize=PROFILE == "short",  # CI sees the same cases every run; the long profile explores
    database=None,
    print_blob=True,
)


@dataclass
class Figures:
    """Figures are one target's counts and worst case."""

    cases: int = 0
    accepted: int = 0
    refused: int = 0
    findings: list[str] = field(default_factory=list)
    max_seconds: float = 0.0
    slowest: str = ""
    max_rss_growth: int = 0
    started: float = field(default_factory=time.perf_counter)


FIGURES: dict[str, Figures] = {}


def _peak_rss() -> int:
    """_peak_rss is this process's peak resident set size in bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _counts(service: Service) -> tuple[int, int, int]:
    with service.db.session() as session:
        return tuple(session.scalar(select(func.count()).select_from(m)) or 0 for m in (Job, JobSpecRow, Task))


@dataclass
class CaseRunner:
    """CaseRunner runs one case through a CLI entry point and checks the contract, recording figures."""

    service: Service
    figures: Figures

    def check(self, invoke: Callable[[], Result], label: str, stores: bool = True) -> Result:
        """check runs ``invoke`` once and fails the case on any broken rule (recorded as a finding)."""
        if self.figures.cases % 200 == 0:
            # a CLI process starts with a small heap; this one grows over thousands of cases, and a
            # full collection of it inside a timed case would be the harness's cost, not the CLI's
            gc.collect()
            gc.freeze()
        before = _counts(self.service)
        rss_before = _peak_rss()
        start = time.perf_counter()
        result = invoke()
        elapsed = time.perf_counter() - start
        growth = _peak_rss() - rss_before
        after = _counts(self.service)
        self.figures.cases += 1
        if elapsed > self.figures.max_seconds:
            self.figures.max_seconds, self.figures.slowest = elapsed, label
        self.figures.max_rss_growth = max(self.figures.max_rss_growth, growth)
        problem = _broken_rule(result, elapsed, growth, before, after, stores)
        if problem:
            self.figures.findings.append(f"{label}: {problem}")
            raise AssertionError(f"{problem}\n--- output ---\n{result.output[:2000]}")
        if result.exit_code == 0:
            self.figures.accepted += 1
        else:
            self.figures.refused += 1
        return result


def _broken_rule(
    result: Result, elapsed: float, growth: int, before: tuple, after: tuple, stores: bool
) -> str | None:
    """_broken_rule names the first rule a case broke, or None."""
    if "Traceback" in result.output or (result.exception and not isinstance(result.exception, SystemExit)):
        return f"traceback / uncaught {type(result.exception).__name__}: {result.exception}"
    if result.exit_code not in (0, 2):
        return f"exit {result.exit_code} (bad input must be exit 2)"
    if elapsed > MAX_CASE_S:
        return f"took {elapsed:.2f} s (> {MAX_CASE_S} s)"
    if growth > MAX_CASE_RSS_GROWTH:
        return f"peak RSS grew {growth / 2**20:.0f} MiB"
    if result.exit_code == 2 and after != before:
        return f"refused but the store changed: {before} -> {after}"
    if result.exit_code == 0 and stores and after[0] not in (before[0], before[0] + 1):
        return f"accepted but stored {after[0] - before[0]} jobs"
    return None


@pytest.fixture(scope="module")
def fuzz_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """fuzz_service is one SQLite store shared by every case of a module (a case is checked by counts)."""
    db = sqlite_database(tmp_path_factory.mktemp("fuzz") / "fuzz.sqlite")
    yield Service(db)
    db.engine.dispose()


def figures(name: str) -> Figures:
    """figures is the named target's figures (created on first use)."""
    return FIGURES.setdefault(name, Figures())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """pytest_terminal_summary prints the fuzz figures: cases, outcomes, findings, worst time and memory."""
    if not FIGURES:
        return
    write = terminalreporter.write_line
    write(f"fuzz profile '{PROFILE}' (tests/fuzz):")
    write("| target | cases | accepted (exit 0) | refused (exit 2) | findings | max s/case | max RSS growth/case | wall s |")
    write("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, f in FIGURES.items():
        wall = time.perf_counter() - f.started
        write(f"| {name} | {f.cases:,} | {f.accepted:,} | {f.refused:,} | {len(f.findings)} | "
              f"{f.max_seconds:.3f} | {f.max_rss_growth / 2**20:.1f} MiB | {wall:.0f} |")
    for name, f in FIGURES.items():
        write(f"slowest case ({name}, {f.max_seconds:.3f} s): {f.slowest[:200]}")
        for finding in f.findings[:10]:
            write(f"finding ({name}): {finding}")


def write_case(directory: Path, name: str, data: bytes) -> Path:
    """write_case writes one case's bytes to a file the CLI reads."""
    path = directory / name
    path.write_bytes(data)
    return path

"""Fuzz ``metasched submit -f FILE`` with grammar-built, mutated job files (see tests/fuzz/conftest.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings

from cli.context import CliState
from cli.main import cli
from meta.service.api import Service
from tests.fuzz.conftest import CASES, CaseRunner, Figures, figures, write_case
from tests.fuzz.grammar import job_file

_names = itertools.count()
# local mode (root on the server host): CliState.service is patched below to the fuzz store
_LOCAL_ENV = {"METASCHED_TENANT": None, "METASCHED_DB_FILE": None, "METASCHED_DB": "sqlite:///fuzz-store-is-patched"}


@pytest.fixture(scope="module")
def runner(fuzz_service: Service) -> CaseRunner:
    return CaseRunner(fuzz_service, figures("job files (metasched submit)"))


@settings(settings.get_profile("fuzz"), max_examples=CASES["jobfile"])
@given(data=job_file())
def test_a_job_file_is_stored_or_refused_in_one_line(
    data: bytes, runner: CaseRunner, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path_factory.getbasetemp()
    path = write_case(directory, f"case-{next(_names) % 64}.yaml", data)
    with monkeypatch.context() as patch:
        patch.setattr(CliState, "service", lambda self: runner.service)
        result = runner.check(
            lambda: CliRunner().invoke(
                cli, ["submit", "-f", str(path)], env=_LOCAL_ENV, prog_name="metasched"
            ),
            label=repr(data[:120]),
        )
    if result.exit_code == 2:
        assert result.stderr.startswith("metasched: error: ") and result.stderr.count("\n") == 1, result.stderr[:500]
        assert len(result.stderr) <= 2100
    else:
        assert result.stdout.strip().startswith("j"), result.output


def test_the_fuzz_harness_notices_a_broken_rule(fuzz_service: Service, tmp_path: Path) -> None:
    """A case that exits 1 is a finding: the harness itself can fail (it is not a rubber stamp)."""
    runner = CaseRunner(fuzz_service, Figures())
    with pytest.raises(AssertionError, match="exit 1"):
        runner.check(lambda: CliRunner().invoke(cli, ["status", "no-such-job"]), label="self-check")

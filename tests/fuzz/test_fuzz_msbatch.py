"""Fuzz ``msbatch`` with grammar-built, mutated sbatch scripts and command lines (see tests/fuzz/conftest.py)."""

from __future__ import annotations

import itertools

import pytest
from click.testing import CliRunner
from hypothesis import given, settings

import cli.local
import cli.sbatch.msbatch
from meta.service.api import Service
from tests.fuzz.conftest import CASES, CaseRunner, figures, write_case
from tests.fuzz.grammar import msbatch_case

_names = itertools.count()
_CLEAN_ENV: dict[str, str | None] = {
    name: None for name in ("SBATCH_ACCOUNT", "SBATCH_JOB_NAME", "SBATCH_PARTITION", "SBATCH_QOS",
                            "SBATCH_TIMELIMIT", "METASCHED_TENANT", "METASCHED_DB_FILE")
}
_CLEAN_ENV["METASCHED_DB"] = "sqlite:///fuzz-store-is-patched"  # local mode; open_service below is the fuzz store


@pytest.fixture(scope="module")
def runner(fuzz_service: Service) -> CaseRunner:
    return CaseRunner(fuzz_service, figures("scripts (msbatch)"))


@settings(settings.get_profile("fuzz"), max_examples=CASES["msbatch"])
@given(case=msbatch_case())
def test_a_script_is_submitted_or_refused(
    case: tuple[bytes, list[str]],
    runner: CaseRunner,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data, argv = case
    path = write_case(tmp_path_factory.getbasetemp(), f"script-{next(_names) % 64}.sh", data)
    words = [w for w in argv if w != "--"] + [str(path)] if "--" not in argv else argv + [str(path)]
    with monkeypatch.context() as patch:
        patch.setattr(cli.local, "open_service", lambda url=None: runner.service)
        patch.chdir(tmp_path_factory.getbasetemp())
        result = runner.check(
            lambda: CliRunner().invoke(cli.sbatch.msbatch.main, words, env=_CLEAN_ENV), label=repr((data[:120], argv))
        )
    if result.exit_code == 2:
        assert result.stderr.startswith("msbatch: error: "), result.stderr[:500]

"""A database URL carries its password: a refused one is never echoed back in an error."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cli.main import cli

PASSWORD = "hunter2-db-password"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql//metasched:{PASSWORD}@db/metasched",  # a typo: no "://"
        f"postgresql+psycopg://metasched:{PASSWORD}@db:notaport/metasched",
        f"mysql://metasched:{PASSWORD}@db/metasched",
    ],
)
def test_a_refused_url_is_a_usage_error_that_never_shows_the_password(url: str) -> None:
    result = CliRunner().invoke(cli, ["list"], env={"METASCHED_DB": url, "METASCHED_TENANT": None})
    assert result.exit_code == 2, result.output
    assert PASSWORD not in result.output and result.stderr.count("\n") == 1

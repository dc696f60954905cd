"""Tests of msbatch's sbatch option syntax: forms, directives, refusals and precedence."""

from __future__ import annotations

import pytest

from cli.sbatch.options import (
    Origin,
    SbatchError,
    Source,
    merge,
    parse_command_line,
    read_directives,
    read_environment,
)


def _values(argv: list[str]) -> dict[str, str | None]:
    return {option.name: option.value for option in parse_command_line(argv).options}


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        pytest.param(["-Jname", "s.sh"], {"job-name": "name"}, id="short-attached"),
        pytest.param(["-J", "name", "s.sh"], {"job-name": "name"}, id="short-separate"),
        pytest.param(["--job-name=name", "s.sh"], {"job-name": "name"}, id="long-equals"),
        pytest.param(["--job-name", "name", "s.sh"], {"job-name": "name"}, id="long-separate"),
        pytest.param(["--part=gpu", "s.sh"], {"partition": "gpu"}, id="unambiguous-prefix"),
        pytest.param(
            ["-QA", "acct", "s.sh"], {"quiet": None, "account": "acct"}, id="clustered-flag-then-value"
        ),
        pytest.param(["--comment", "-x", "s.sh"], {"comment": "-x"}, id="value-may-start-with-dash"),
        pytest.param(
            ["-q", "low", "-G", "a100:2", "s.sh"], {"qos": "low", "gpus": "a100:2"}, id="short-q-and-G"
        ),
        pytest.param(["-J", "a", "-J", "b", "s.sh"], {"job-name": "b"}, id="later-wins"),
    ],
)
def test_option_forms(argv: list[str], want: dict[str, str | None]) -> None:
    assert _values(argv) == want


def test_options_stop_at_the_script_and_the_rest_are_its_arguments() -> None:
    command = parse_command_line(["-A", "t", "job.sh", "--nodes=4", "-J", "x"])
    assert command.script == "job.sh"
    assert command.args == ("--nodes=4", "-J", "x")
    assert [option.name for option in command.options] == ["account"]


def test_double_dash_ends_the_options() -> None:
    command = parse_command_line(["-A", "t", "--", "-odd-name.sh", "a"])
    assert (command.script, command.args) == ("-odd-name.sh", ("a",))


def test_no_script() -> None:
    assert parse_command_line(["-A", "t"]).script is None


@pytest.mark.parametrize(
    ("argv", "want_message"),
    [
        pytest.param(
            ["--licenses=x", "s.sh"], "unsupported sbatch option --licenses (on the command line)", id="long"
        ),
        pytest.param(["--excl", "s.sh"], "ambiguous option --excl", id="ambiguous-prefix"),
        pytest.param(
            ["--licens=x", "s.sh"], "unsupported sbatch option --licenses", id="prefix-of-unsupported"
        ),
        pytest.param(["-L", "lic", "s.sh"], "unsupported sbatch option -L/--licenses", id="short"),
        pytest.param(["--nice=5", "s.sh"], "unsupported sbatch option --nice", id="with-value"),
        pytest.param(["--frobnicate", "s.sh"], "unknown option --frobnicate", id="not-sbatch-at-all"),
        pytest.param(["-Z", "s.sh"], "unknown option -Z", id="unknown-short"),
        pytest.param(["--parsable=yes", "s.sh"], "option --parsable takes no value", id="flag-with-value"),
        pytest.param(["-J"], "option --job-name needs a value", id="missing-value"),
    ],
)
def test_command_line_refusals_name_the_option(argv: list[str], want_message: str) -> None:
    with pytest.raises(SbatchError) as caught:
        parse_command_line(argv)
    assert want_message in str(caught.value)


# --- directives -----------------------------------------------------------------------------

SCRIPT = """#!/bin/bash
# a comment
#SBATCH -J first   # trailing comment
#SBATCH --time=1:00:00 --account=acct

#SBATCH --comment="two words"
echo start
#SBATCH --nodes=4
"""


def test_directives_are_read_from_the_leading_comment_block_only() -> None:
    found = {option.name: option.value for option in read_directives(SCRIPT)}
    assert found == {"job-name": "first", "time": "1:00:00", "account": "acct", "comment": "two words"}


def test_directives_carry_their_line_numbers() -> None:
    lines = {option.name: option.origin.line for option in read_directives(SCRIPT)}
    assert lines == {"job-name": 3, "time": 4, "account": 4, "comment": 6}


def test_sbatch_lookalikes_are_comments() -> None:
    text = "#!/bin/sh\n#SBATCHED --exclusive\n# SBATCH --exclusive\n##SBATCH --exclusive\ntrue\n"
    assert read_directives(text) == []


def test_unsupported_directives_are_all_reported_with_their_lines() -> None:
    text = "#!/bin/bash\n#SBATCH -A t\n#SBATCH --licenses=x\n#SBATCH --nice=5\n#SBATCH --key=k\nrun\n"
    with pytest.raises(SbatchError) as caught:
        read_directives(text)
    assert caught.value.problems == [
        "unsupported sbatch option --licenses (in #SBATCH line 3)",
        "unsupported sbatch option --nice (in #SBATCH line 4)",
        "--key is only accepted on the command line (in #SBATCH line 5)",
    ]


def test_unsupported_directive_after_the_first_command_is_ignored() -> None:
    assert read_directives("#!/bin/bash\nhostname\n#SBATCH --licenses=x\n") == []


@pytest.mark.parametrize(
    ("line", "want_message"),
    [
        pytest.param('#SBATCH --comment="open', "cannot split #SBATCH line 2", id="unbalanced-quote"),
        pytest.param("#SBATCH -N 2 stray", "unexpected word 'stray' in #SBATCH line 2", id="stray-word"),
    ],
)
def test_malformed_directives(line: str, want_message: str) -> None:
    with pytest.raises(SbatchError) as caught:
        read_directives(f"#!/bin/bash\n{line}\n")
    assert want_message in str(caught.value)


# --- precedence -----------------------------------------------------------------------------


def _cli(*argv: str) -> list:
    return list(parse_command_line([*argv, "s.sh"]).options)


def test_command_line_wins_over_directives() -> None:
    directives = read_directives("#!/bin/bash\n#SBATCH -J script-name\n#SBATCH -t 10\n")
    merged = merge(directives, [], _cli("-J", "cli-name"))
    assert merged.value("job-name") == "cli-name"
    assert merged.value("time") == "10"
    assert merged.get("job-name").origin.source is Source.COMMAND_LINE  # type: ignore[union-attr]


def test_environment_sits_between_directives_and_command_line() -> None:
    directives = read_directives("#!/bin/bash\n#SBATCH -A from-script\n#SBATCH -p script-part\n")
    environment = read_environment(
        {"SBATCH_ACCOUNT": "from-env", "SBATCH_PARTITION": "env-part", "HOME": "/x"}
    )
    merged = merge(directives, environment, _cli("-p", "cli-part"))
    assert merged.value("account") == "from-env"
    assert merged.value("partition") == "cli-part"
    assert merged.get("account").origin.describe() == "from $SBATCH_ACCOUNT"  # type: ignore[union-attr]


def test_a_group_is_replaced_whole_by_a_higher_source() -> None:
    directives = read_directives("#!/bin/bash\n#SBATCH --mem-per-cpu=4G\n#SBATCH --gres=gpu:a100:8\n")
    merged = merge(directives, [], _cli("--mem=100G", "--gpus-per-node=4"))
    assert merged.value("mem") == "100G" and merged.get("mem-per-cpu") is None
    assert merged.value("gpus-per-node") == "4" and merged.get("gres") is None


def test_two_members_of_a_group_in_one_source_are_refused() -> None:
    with pytest.raises(SbatchError) as caught:
        merge([], [], _cli("--mem=1G", "--mem-per-cpu=1G"))
    assert "--mem and --mem-per-cpu are mutually exclusive" in str(caught.value)


def test_origin_descriptions() -> None:
    assert Origin(Source.DIRECTIVE, line=4).describe() == "in #SBATCH line 4"
    assert Origin(Source.COMMAND_LINE).describe() == "on the command line"

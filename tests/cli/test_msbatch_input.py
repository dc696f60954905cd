"""msbatch on untrusted input: exact option names, DOS line breaks, line splitting, ASCII-only numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.sbatch.msbatch import main
from cli.sbatch.options import SbatchError, parse_command_line, read_directives
from cli.sbatch.script import DOS_LINE_BREAKS, read_script
from cli.sbatch.values import parse_array, parse_count, parse_gpu_request, parse_gres, parse_signal

# What sbatch 22.05.8 prints for a script with "\r\n" (captured on the dev cluster), as two lines:
#   sbatch: error: Batch script contains DOS line breaks (\r\n)
#   sbatch: error: instead of expected UNIX line breaks (\n).
SBATCH_DOS_WORDS = (
    r"Batch script contains DOS line breaks (\r\n)",
    r"instead of expected UNIX line breaks (\n).",
)


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """db_url is a fresh SQLite file, made the default through METASCHED_DB; SBATCH_* are cleared."""
    url = f"sqlite:///{tmp_path / 'msbatch.sqlite'}"
    monkeypatch.setenv("METASCHED_DB", url)
    monkeypatch.delenv("METASCHED_TENANT", raising=False)
    for variable in ("SBATCH_ACCOUNT", "SBATCH_JOB_NAME", "SBATCH_PARTITION", "SBATCH_QOS", "SBATCH_TIMELIMIT"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    return url


def _msbatch(*argv: str) -> Result:
    return CliRunner().invoke(main, list(argv))


def _script(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "job.sh"
    path.write_bytes(data)
    return str(path)


def _usage_error(result: Result) -> str:
    """_usage_error is the one stderr line of an exit-2 refusal (no traceback, nothing on stdout)."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# --- exact option names win over prefixes ------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "name"),
    [("--wait", "wait"), ("--gpu-bind=closest", "gpu-bind")],
)
def test_an_exact_unsupported_name_is_refused_by_name_not_called_ambiguous(word: str, name: str) -> None:
    # --wait is also a prefix of --wait-all-nodes: getopt_long takes the exact match, so sbatch
    # reads --wait; msbatch refuses it by that name (--export, a prefix of --export-file, is read)
    with pytest.raises(SbatchError) as caught:
        parse_command_line([word, "s.sh"])
    assert caught.value.problems == [f"unsupported sbatch option --{name} (on the command line)"]


def test_an_exact_unsupported_directive_is_refused_by_name(db_url: str, tmp_path: Path) -> None:
    script = _script(tmp_path, b"#!/bin/bash\n#SBATCH -A t\n#SBATCH --wckey=x\nhostname\n")
    assert _usage_error(_msbatch(script)) == "msbatch: error: unsupported sbatch option --wckey (in #SBATCH line 3)"


def test_a_real_prefix_of_two_options_is_still_ambiguous() -> None:
    with pytest.raises(SbatchError, match=r"ambiguous option --expo .*could be --export, --export-file"):
        parse_command_line(["--expo", "s.sh"])


# --- DOS line breaks ---------------------------------------------------------------------------


def test_dos_line_breaks_are_refused_in_sbatchs_words(db_url: str, tmp_path: Path) -> None:
    script = _script(tmp_path, b"#!/bin/bash\r\n#SBATCH -A t\r\nhostname\r\n")
    assert DOS_LINE_BREAKS == " ".join(SBATCH_DOS_WORDS)
    assert _usage_error(_msbatch(script)) == f"msbatch: error: {DOS_LINE_BREAKS}"


def test_one_dos_line_break_anywhere_is_refused(tmp_path: Path) -> None:
    script = _script(tmp_path, b"#!/bin/bash\n#SBATCH -A t\nhostname\necho done\r\n")
    with pytest.raises(SbatchError) as caught:
        read_script(script)
    assert caught.value.problems == [DOS_LINE_BREAKS]


def test_a_lone_carriage_return_is_kept_byte_for_byte(db_url: str, tmp_path: Path) -> None:
    # sbatch accepts a lone \r (only \r\n is refused); the spec must hold the script unchanged
    text = "#!/bin/bash\n#SBATCH -A t\nprintf 'progress\\r50%%\\r100%%'\necho 'a\rb'\n"
    result = _msbatch("--test-only", _script(tmp_path, text.encode()))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["script"] == text


# --- lines are split at \n only ----------------------------------------------------------------


@pytest.mark.parametrize("separator", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028", "\u2029", "\r"])
def test_a_directive_hidden_after_another_line_break_character_is_part_of_a_comment(separator: str) -> None:
    # sbatch and bash split at \n only: "# note<sep>#SBATCH ..." is one comment line to both
    text = f"#!/bin/bash\n#SBATCH -A mine\n# note{separator}#SBATCH --account=other\nhostname\n"
    assert [(o.name, o.value) for o in read_directives(text)] == [("account", "mine")]


def test_arguments_are_bound_after_the_directive_block_of_an_odd_script(db_url: str, tmp_path: Path) -> None:
    text = "#!/bin/bash\n#SBATCH -A t\n# note\x0cstill a comment\nprintf 'a\rb'\n"
    result = _msbatch("--test-only", _script(tmp_path, text.encode()), "x y")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["script"] == (
        "#!/bin/bash\n#SBATCH -A t\n# note\x0cstill a comment\n"
        "set -- 'x y'  # msbatch: the script's command-line arguments\nprintf 'a\rb'\n"
    )


# --- numbers are ASCII digits ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_count, "٣"),  # Arabic-Indic three: str.isdigit() and int() take it, Slurm does not
        (parse_count, "²"),  # isdigit() but not int(): was a raw "invalid literal" message
        (parse_gpu_request, "٨"),
        (parse_gpu_request, "a100:٨"),
        (parse_gres, "gpu:a100:٨"),
        (parse_array, "٠-٣"),
        (parse_array, "0-3%٢"),
        (parse_signal, "USR1@٩٠"),
        (parse_signal, "١٠"),
    ],
)
def test_numbers_must_be_ascii_digits(parse, text: str) -> None:  # noqa: ANN001 - a parser
    with pytest.raises(ValueError) as caught:
        parse(text)
    assert "invalid literal" not in str(caught.value)


def test_a_non_ascii_count_is_a_usage_error(db_url: str) -> None:
    line = _usage_error(_msbatch("-A", "t", "-N", "٢", "--wrap", "hostname"))
    assert line == "msbatch: error: invalid --nodes=٢ (on the command line): expected a whole number >= 1"


def test_a_script_past_the_size_cap_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    script = _script(tmp_path, b"#!/bin/bash\n#SBATCH -A t\nhostname\n#" + b"y" * (5 * 1024 * 1024))
    with pytest.raises(SbatchError) as caught:
        read_script(script)
    assert caught.value.problems == [f"script {script!r} is larger than 1024 KiB"]

"""msbatch --dependency, --kill-on-invalid-dep, --hold and --begin: parsing, precedence, translation, sbatch's time formats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from cli.sbatch.begin import BeginError, parse_begin
from cli.sbatch.msbatch import prepare
from cli.sbatch.options import SbatchError, parse_command_line
from cli.sbatch.translate import Translation

CWD = "/home/alice/proj"
A, B = "j4k9x2m7q", "jzzzzzzzz"


def run(tmp_path: Path, directives: list[str], *argv: str) -> Translation:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {d}\n" for d in directives) + "true\n")
    return prepare(parse_command_line([*argv, str(script)]), {}, CWD).translation


def error(tmp_path: Path, directives: list[str], *argv: str) -> str:
    with pytest.raises(SbatchError) as caught:
        run(tmp_path, directives, *argv)
    return "\n".join(caught.value.problems)


def test_dependency_forms_translate_to_the_canonical_text(tmp_path: Path) -> None:
    data = run(tmp_path, ["-A t", f"--dependency=afterok:{A}:{B}"]).data
    assert data["dependency"] == f"afterok:{A},afterok:{B}"
    data = run(tmp_path, ["-A t"], "-d", f"after:{A}+5?afternotok:{B}").data
    assert data["dependency"] == f"after:{A}+5?afternotok:{B}"
    data = run(tmp_path, ["-A t", "-d singleton"], f"-d{'afterany:' + A}").data  # the command line wins
    assert data["dependency"] == f"afterany:{A}"
    translation = run(tmp_path, ["-A t", "--dependency=singleton", "--kill-on-invalid-dep=YES"])
    assert translation.spec is not None and translation.spec.dependency == "singleton"
    assert translation.spec.kill_on_invalid_dep is True
    assert "dependency" not in run(tmp_path, ["-A t"]).data


@pytest.mark.parametrize(
    ("directive", "message"),
    [
        (f"--dependency=expand:{A}", "cannot grow"),
        (f"--dependency=afterburstbuffer:{A}", "no burst buffers"),
        ("--dependency=afterok:12345", "not a metasched job id"),
        (f"--dependency=afterok:{A},afterok:{B}?singleton", "either ','"),
        ("--kill-on-invalid-dep=maybe", "expected yes or no"),
        ("--begin=soon", "cannot read 'soon'"),
        ("--begin=now+5min", "unknown unit 'min'"),
    ],
)
def test_bad_values_are_refused_naming_the_option_and_line(tmp_path: Path, directive: str, message: str) -> None:
    problem = error(tmp_path, ["-A t", directive])
    assert message in problem and "(in #SBATCH line 3)" in problem and problem.startswith("invalid --")


def test_hold_and_begin_translate(tmp_path: Path) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    translation = run(tmp_path, ["-A t", "-H", "--begin=now+10minutes"])
    after = datetime.now(UTC)
    assert translation.data["hold"] is True
    begin = datetime.fromisoformat(translation.data["begin"])
    assert before + timedelta(minutes=10) <= begin <= after + timedelta(minutes=10)
    assert translation.spec is not None and translation.spec.hold and translation.spec.begin == begin
    assert "hold" not in run(tmp_path, ["-A t"]).data
    assert run(tmp_path, ["-A t"], "-b", "2026-12-24T10:30:00").spec is not None


# sbatch's --begin formats, at 18:30:15 on 2026-12-03 in UTC+1 (Slurm's parse_time semantics)
ZONE = timezone(timedelta(hours=1))
NOW = datetime(2026, 12, 3, 17, 30, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "local"),
    [
        ("now", "2026-12-03T18:30:15"),
        ("now+90", "2026-12-03T18:31:45"),
        ("now+5minutes", "2026-12-03T18:35:15"),
        ("now + 2 hours", "2026-12-03T20:30:15"),
        ("now+1day", "2026-12-04T18:30:15"),
        ("now+1week", "2026-12-10T18:30:15"),
        ("19:00", "2026-12-03T19:00:00"),  # still ahead today
        ("18:30", "2026-12-04T18:30:00"),  # this minute: the next day, as Slurm
        ("16:00:30", "2026-12-04T16:00:30"),
        ("10:00 pm", "2026-12-03T22:00:00"),
        ("12:00AM", "2026-12-04T00:00:00"),
        ("midnight", "2026-12-04T00:00:00"),
        ("noon", "2026-12-04T12:00:00"),
        ("teatime", "2026-12-04T16:00:00"),
        ("elevenses", "2026-12-04T11:00:00"),
        ("fika", "2026-12-04T15:00:00"),
        ("today", "2026-12-03T00:00:00"),
        ("tomorrow", "2026-12-04T00:00:00"),
        ("tomorrow 09:15", "2026-12-04T09:15:00"),
        ("2026-12-24", "2026-12-24T00:00:00"),
        ("2026-12-24T10:30", "2026-12-24T10:30:00"),
        ("2026-12-24T10:30:05", "2026-12-24T10:30:05"),
        ("12/24", "2026-12-24T00:00:00"),
        ("1224", "2026-12-24T00:00:00"),
        ("01/02", "2027-01-02T00:00:00"),  # past this year: next year
        ("01.02.27", "2027-01-02T00:00:00"),
    ],
)
def test_begin_formats(text: str, local: str) -> None:
    want = datetime.fromisoformat(local).replace(tzinfo=ZONE).astimezone(UTC)
    assert parse_begin(text, NOW, ZONE) == want


@pytest.mark.parametrize(
    "text",
    ["", "soon", "25:00", "13/01", "2026-02-30", "now+3fortnights", "uts12", "2030-01-01", "now+999999999weeks",
     "now-999999999weeks", "uts99999999999999999999", "99999999999999999999"],
)
def test_bad_begin_times(text: str) -> None:
    with pytest.raises(BeginError):
        parse_begin(text, NOW, ZONE)


def test_uts_is_seconds_since_the_epoch() -> None:
    assert parse_begin("uts1796400000", NOW, ZONE) == datetime.fromtimestamp(1796400000, UTC)

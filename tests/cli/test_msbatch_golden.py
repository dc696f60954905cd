"""Golden tests: realistic sbatch scripts and the JobSpec msbatch translates each into.

Each ``tests/golden/msbatch/NAME.sh`` may come with ``NAME.args`` (one line of shell words;
``{script}`` marks where the script goes, default: the script alone) and is compared with
``NAME.expected.json``. ``METASCHED_UPDATE_GOLDEN=1`` rewrites the expected files.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from cli.sbatch.msbatch import prepare
from cli.sbatch.options import parse_command_line

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "msbatch"
CWD = "/home/alice/proj"  # a fixed submission directory keeps the expected paths stable
SCRIPT_MARKER = "<the script file, unchanged>"


def _argv(script: Path) -> list[str]:
    args_file = script.with_suffix(".args")
    if not args_file.exists():
        return [str(script)]
    words = shlex.split(args_file.read_text())
    return [str(script) if word == "{script}" else word for word in words]


def _rendered(script: Path) -> dict[str, Any]:
    """_rendered is what a golden file holds: the non-default spec fields and the notes."""
    prepared = prepare(parse_command_line(_argv(script)), environ={}, cwd=CWD)
    spec = prepared.translation.spec
    fields = spec.model_dump(mode="json", exclude_defaults=True)
    fields["kind"] = spec.kind.value  # a default of its model, but the point of the test
    if fields.get("script") == script.read_text():
        fields["script"] = SCRIPT_MARKER  # keep the golden file readable
    return {"spec": fields, "notes": list(prepared.translation.notes)}


@pytest.mark.parametrize("script", sorted(GOLDEN.glob("*.sh")), ids=lambda path: path.stem)
def test_golden_translation(script: Path) -> None:
    expected_file = script.with_suffix(".expected.json")
    actual = _rendered(script)
    if os.environ.get("METASCHED_UPDATE_GOLDEN") == "1":
        expected_file.write_text(json.dumps(actual, indent=2, sort_keys=True) + "\n")
    assert expected_file.exists(), f"no {expected_file.name}; run with METASCHED_UPDATE_GOLDEN=1"
    assert actual == json.loads(expected_file.read_text())


def test_golden_set_covers_the_required_cases() -> None:
    names = {path.stem for path in GOLDEN.glob("*.sh")}
    assert {
        "ddp_2node_a100",
        "array_infer_t4",
        "eval_1gpu",
        "gpus16_2nodes",
        "preprocess_mem_per_cpu",
    } <= names

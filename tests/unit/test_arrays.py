"""Array jobs: the spec's array field, element ids (JOB_3, JOB_[1-3]), squeue's collapsed ids, SLURM_ARRAY_*."""

from __future__ import annotations

import pytest

from meta.model.arrays import (
    ElementRef,
    array_variables,
    collapsed_id,
    compress_indexes,
    parse_element_ref,
    parse_index_set,
    text_step,
)
from meta.model.spec import SpecError, TrainingSpec, spec_from_dict, spec_hash, spec_to_json

BASE = {"name": "sweep", "tenant": "t", "command": "echo", "resources": {"cpus": 1}}


def test_an_array_job_has_one_task_per_index_named_by_it() -> None:
    spec = spec_from_dict({**BASE, "kind": "training", "array": {"indexes": [1, 3, 5, 7], "max_parallel": 2}})
    assert spec.task_count() == 4 and spec.task_names() == ["1", "3", "5", "7"]
    assert spec.throttle() == 2 and spec.array is not None and spec.array.text() == "1,3,5,7%2"


def test_evaluation_arrays_keep_their_kind_and_inference_refuses_an_array() -> None:
    spec = spec_from_dict({**BASE, "kind": "evaluation", "array": {"indexes": [0, 1]}})
    assert spec.kind.value == "evaluation" and spec.task_names() == ["0", "1"] and spec.throttle() is None
    with pytest.raises(SpecError, match="array: an inference job's tasks are its 'partitions'"):
        spec_from_dict({**BASE, "kind": "inference", "partitions": 2, "output": "/o", "array": {"indexes": [0]}})


@pytest.mark.parametrize("indexes", [[], [2, 1], [1, 1], [-1], [True]])
def test_bad_indexes_are_refused_by_field(indexes: list) -> None:
    with pytest.raises(SpecError, match=r"^array\.indexes"):
        spec_from_dict({**BASE, "kind": "training", "array": {"indexes": indexes}})


def test_a_job_without_an_array_keeps_its_stored_form_and_hash() -> None:
    spec = spec_from_dict({**BASE, "kind": "training"})
    assert "array" not in spec_to_json(spec)
    assert isinstance(spec, TrainingSpec) and spec_hash(spec) == spec_hash(spec_from_dict({**BASE, "kind": "training"}))


@pytest.mark.parametrize(
    ("ref", "want"),
    [
        ("j4k9x2m7", ElementRef("j4k9x2m7")),
        ("j4k9x2m7_3", ElementRef("j4k9x2m7", (3,))),
        ("j4k9x2m7_[1-3,5]", ElementRef("j4k9x2m7", (1, 2, 3, 5))),
        ("j4k9x2m7_[0-8:4]", ElementRef("j4k9x2m7", (0, 4, 8))),
        ("j4k9x2m7_*", ElementRef("j4k9x2m7")),
        (" 1234_7 ", ElementRef("1234", (7,))),
    ],
)
def test_element_refs(ref: str, want: ElementRef) -> None:
    assert parse_element_ref(ref) == want


def test_bad_index_sets_say_which_item() -> None:
    with pytest.raises(ValueError, match="'x'"):
        parse_index_set("1,x")
    with pytest.raises(ValueError, match="bad array range '5-1'"):
        parse_index_set("5-1")


def test_squeue_collapses_waiting_elements() -> None:
    assert compress_indexes([7, 0, 1, 2, 3, 9, 10]) == "0-3,7,9-10"
    assert collapsed_id("j1", [2, 3, 4, 5, 6, 7], 2) == "j1_[2-7%2]"
    assert collapsed_id("j1", [4], None) == "j1_4"
    assert collapsed_id("j1", [4, 6], None) == "j1_[4,6]"


@pytest.mark.parametrize(("text", "step"), [("0-6:2", 2), ("0-6:2,10", 2), ("1,20-26:3", 3), ("2,4,6", 1),
                                           ("0-6:2%2", 2), ("0-5%3", 1), ("0-4:2,10-30:5", 2), ("0-20:5,30-34:2", 5)])  # fmt: skip
def test_the_step_is_the_texts_as_sbatch_sets_it(text: str, step: int) -> None:
    assert text_step(text) == step


def test_array_variables_follow_sbatch() -> None:
    env = array_variables("j1", 4, [0, 2, 4, 6], 2)
    assert env == {
        "SLURM_ARRAY_JOB_ID": "j1", "SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4",
        "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "6", "SLURM_ARRAY_TASK_STEP": "2",
    }  # fmt: skip

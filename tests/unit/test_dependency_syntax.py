"""sbatch's --dependency syntax (meta/model/dependency.py) and the spec fields that carry the gates."""

from __future__ import annotations

import pytest

from meta.model.dependency import (
    MAX_CONDITIONS,
    Condition,
    DependencyError,
    DependencyType,
    parse_dependency,
)
from meta.model.spec import SpecError, spec_from_dict, spec_hash, spec_to_json

A, B = "j4k9x2m7q", "jzzzzzzzz"
UUID = "0b8e1f9c-6a3e-4c1a-9f7e-2d5b8c9a1e3f"
BASE = {"kind": "training", "name": "n", "tenant": "t", "command": "true", "resources": {"cpus": 1}}


def test_types_jobs_delays_and_separators() -> None:
    dep = parse_dependency(f"after:{A}+5:{B},afterok:{UUID},afterany:{A},afternotok:{B},singleton")
    assert not dep.any_of
    assert dep.conditions == (
        Condition(DependencyType.AFTER, A, 300.0),
        Condition(DependencyType.AFTER, B),
        Condition(DependencyType.AFTER_OK, UUID),
        Condition(DependencyType.AFTER_ANY, A),
        Condition(DependencyType.AFTER_NOT_OK, B),
        Condition(DependencyType.SINGLETON),
    )
    assert dep.jobs() == (A, B, UUID) and dep.singleton()
    either = parse_dependency(f"afterok:{A}?afternotok:{A}")
    assert either.any_of and either.normalise() == f"afterok:{A}?afternotok:{A}"


def test_normalise_is_canonical_and_stable() -> None:
    dep = parse_dependency(f" AfterOK:{A.upper()}:{B} , afterok:{A} ")
    assert dep.normalise() == f"afterok:{A},afterok:{B}"
    assert parse_dependency(dep.normalise()) == dep


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        (f"afterok:{A},afterok:{B}?singleton", "either ','"),
        (f"afterok:{A},,afterok:{B}", "empty dependency"),
        ("afterok", "needs at least one job id"),
        (f"afterbogus:{A}", "unknown dependency type"),
        (f"afterburstbuffer:{A}", "no burst buffers"),
        (f"expand:{A}", "cannot grow"),
        (f"singleton:{A}", "singleton takes no job ids"),
        (f"afterok:{A}+5", r"\+time is for 'after' only"),
        (f"after:{A}+x", "bad delay"),
        (f"after:{A}+9999999", "bad delay"),
        ("afterok:1234", "not a metasched job id"),
        (f"afterok:{A}_3", "array elements"),
        ("afterok:" + ":".join(f"j{i:08d}" for i in range(MAX_CONDITIONS + 1)), "more than 64"),
        ("afterok:" + "j" * 5000, "longer than 4096"),
    ],
)
def test_refusals_say_why(text: str, message: str) -> None:
    with pytest.raises(DependencyError, match=message):
        parse_dependency(text)


def test_spec_fields_validate_normalise_and_keep_old_hashes() -> None:
    spec = spec_from_dict({**BASE, "dependency": f"afterok:{A.upper()}", "begin": "2026-12-04T10:00:00+01:00",
                           "hold": True, "kill_on_invalid_dep": True})  # fmt: skip
    assert spec.dependency == f"afterok:{A}" and spec.hold and spec.kill_on_invalid_dep
    assert spec.begin is not None and spec.begin.isoformat() == "2026-12-04T09:00:00+00:00"
    plain = spec_from_dict(BASE)
    stored = spec_to_json(plain)
    assert all(name not in stored for name in ("dependency", "begin", "hold", "kill_on_invalid_dep"))
    assert spec_hash(plain) == spec_hash(spec_from_dict({**BASE, "hold": False, "dependency": None}))
    with pytest.raises(SpecError, match="dependency: .*burst buffers"):
        spec_from_dict({**BASE, "dependency": f"afterburstbuffer:{A}"})
    corr = parse_dependency(f"aftercorr:{A}:{B}")
    assert corr.corresponding() and corr.normalise() == f"aftercorr:{A},aftercorr:{B}"
    with pytest.raises(SpecError, match="begin"):
        spec_from_dict({**BASE, "begin": "soon"})

"""A policy file's numbers are finite: YAML's .nan, .inf and 1e400 are refused by name (issue 22, S13).

A NaN compares false with every bound, so without this it would reach the scheduler as a half-life
or a weight and every decision using it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from meta.config.policy_file import PolicyFileError, load_policy_config


@pytest.mark.parametrize("number", [".nan", ".inf", "-.inf", "1e400", '"1e400"'])
def test_a_non_finite_setting_is_refused_naming_it(tmp_path: Path, number: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(f"usage_half_life_s: {number}\n")
    with pytest.raises(PolicyFileError) as refused:
        load_policy_config(path)
    assert "usage_half_life_s: must be a finite number" in str(refused.value)


def test_a_finite_setting_is_taken(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("usage_half_life_s: 3600\n")
    assert load_policy_config(path).usage_half_life_s == 3600

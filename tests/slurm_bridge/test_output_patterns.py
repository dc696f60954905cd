"""Tests for slurm_bridge.output_patterns: only the given letters are expanded, the rest stays Slurm's."""

from __future__ import annotations

from slurm_bridge.output_patterns import array_pattern_values, expand_patterns


def test_array_default_output_is_expanded_per_element() -> None:
    values = array_pattern_values("j4k9x2m7", 3)
    assert expand_patterns("slurm-%A_%a.out", values) == "slurm-j4k9x2m7_3.out"


def test_other_patterns_and_double_percent_are_left_for_slurm() -> None:
    values = array_pattern_values("j1", 5)
    assert expand_patterns("%x-%j-%A_%a-%%a.log", values) == "%x-%j-j1_5-%%a.log"


def test_width_pads_numbers_only() -> None:
    values = array_pattern_values("j1", 7)
    assert expand_patterns("o-%4a-%3A", values) == "o-0007-j1"


def test_backslash_turns_expansion_off_as_in_sbatch() -> None:
    assert expand_patterns("out\\_%a", {"a": "1"}) == "out\\_%a"

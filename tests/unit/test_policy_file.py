"""Policy files: settings over the defaults, and every mistake named."""

from __future__ import annotations

import pytest

from meta.config.policy_file import PolicyFileError, load_policy_config, policy_config_from
from meta.policy.config import SchedulerConfig
from meta.sim.tuning import TUNED, TUNED_FILE


def test_settings_apply_over_the_defaults(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("max_wait_s: 7200\nfair_share_horizon_s: 0\ngpu_cost_weights: {h100: 4}\n")
    config = load_policy_config(path)
    assert config.max_wait_s == 7200.0
    assert config.fair_share_horizon_s == 0.0
    assert config.gpu_cost("h100") == 4.0
    assert config.short_job_weight == SchedulerConfig().short_job_weight


def test_an_empty_file_is_the_defaults(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("")
    assert load_policy_config(path) == SchedulerConfig()


def test_settings_apply_over_a_given_base():
    base = SchedulerConfig(max_wait_s=60.0)
    assert policy_config_from({"hold_min_gpus": 4}, base) == SchedulerConfig(max_wait_s=60.0, hold_min_gpus=4)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"max_wiat_s": 1}, "unknown setting 'max_wiat_s' (did you mean 'max_wait_s'?)"),
        ({"max_wait_s": "soon"}, "max_wait_s: Input should be a valid number"),
        ({"preemption_enabled": "maybe"}, "preemption_enabled: Input should be a valid boolean"),
        ([1, 2], "want a mapping of settings, got list"),
    ],
)
def test_mistakes_are_named(data, message):
    with pytest.raises(PolicyFileError) as err:
        policy_config_from(data, source="p.yaml")
    assert message in str(err.value)
    assert str(err.value).startswith("p.yaml: ")


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_wait_s: [1\n")
    with pytest.raises(PolicyFileError, match="not valid YAML"):
        load_policy_config(bad)


def test_the_tuned_file_is_an_alias_of_the_shipped_defaults():
    # the daemon with no policy file runs what the benchmarks measured: no separate tuned file
    assert TUNED == {}
    assert load_policy_config(TUNED_FILE) == SchedulerConfig()


def test_the_shipped_defaults_are_the_setting_the_tuning_chose():
    from benchmarks.tune_policy import GRID, SHIPPED

    defaults = SchedulerConfig()
    assert {name: getattr(defaults, name) for name in GRID[SHIPPED]} == GRID[SHIPPED]


def test_the_length_cap_is_a_setting(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("short_job_max_penalty_s: 3600\n")
    assert load_policy_config(path).short_job_max_penalty_s == 3600.0
    path.write_text("short_job_max_penalty_s: null\n")  # uncapped
    assert load_policy_config(path).short_job_max_penalty_s is None
    with pytest.raises(PolicyFileError, match="short_job_max_penalty_s"):
        policy_config_from({"short_job_max_penalty_s": "an hour"})


def test_the_tenant_order_is_a_setting(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("tenant_order: multifactor\n")
    assert load_policy_config(path).tenant_order == "multifactor"
    assert SchedulerConfig().tenant_order == "turns"  # opt-in: the shipped order is unchanged
    with pytest.raises(PolicyFileError, match="tenant_order"):
        policy_config_from({"tenant_order": "slurm"})

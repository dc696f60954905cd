"""``meta.plan.scenario``, ``meta.plan.what_if`` and ``metasched plan what-if``: scenarios parsed and bounded, applied
deterministically, and replayed beside today with the direction of each change checked on a congested history."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from meta.model.durations import utcnow
from meta.model.errors import InvalidRequest
from meta.plan.calibrate import replay
from meta.plan.scenario import (
    MAX_NODES,
    NodeChange,
    Scenario,
    apply_scenario,
    edit_cluster,
    fit_trend,
    parse_add,
    parse_demand,
    parse_remove,
    parse_share,
    scale_demand,
    scenario,
    scenarios_from_text,
)
from meta.plan.what_if import WEIGHTS_IDLE, largest_gang, stranded, what_if
from meta.sim.cluster import ClusterSpec, NodeGroup
from meta.sim.tuning import metasched_config
from tests.plan_support import assert_usage_error, congested_rows, congested_store, export, inputs, row, run

PERIOD = 2.0

# --- parsing and bounds ---------------------------------------------------------------------------------------------


def test_options_parse_into_changes() -> None:
    assert parse_add("h100:8x4") == NodeChange("h100", 4, 8)
    assert parse_add(" h100 : 8 x 4 ") == NodeChange("h100", 4, 8)
    assert parse_remove("a100:2") == NodeChange("a100", 2, None)
    assert parse_remove("a100:8x2") == NodeChange("a100", 2, 8)
    assert parse_share("tenant-a=50") == ("tenant-a", 50.0)
    assert parse_demand("tenant-b=1.5") == ("tenant-b", 1.5) and parse_demand("*=1.2") == ("*", 1.2)
    found = scenario("s", add=["h100:8x4"], share=["tenant-a=50"], demand=["*=1.2"], horizon="90d")
    assert found.changes() == ["--add-nodes h100:8x4", "--share tenant-a=50", "--demand *=1.2",
                               "--trend --horizon 90d"]


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("add", "h100:8", "expected TYPE:GPUSxCOUNT"),
        ("add", "h100x4", "expected TYPE:GPUSxCOUNT"),
        ("add", "h100:8x0", "the node count must be from 1 to 10,000"),
        ("add", f"h100:8x{MAX_NODES + 1}", "the node count must be from 1 to 10,000"),
        ("add", "h100:0x4", "GPUs per node must be from 1 to 64"),
        ("add", "h100:65x4", "GPUs per node must be from 1 to 64"),
        ("remove", "a100", "expected TYPE:COUNT"),
        ("remove", "a100:-1", "expected TYPE:COUNT"),
        ("share", "tenant-a", "expected TENANT=WEIGHT"),
        ("share", "tenant-a=0", "above 0 and at most 1,000,000"),
        ("share", "tenant-a=2e6", "above 0 and at most 1,000,000"),
        ("share", "tenant-a=nan", "not a finite number"),
        ("share", "*=5", "name one tenant"),
        ("demand", "tenant-b=11", "from 0 to 10"),
        ("demand", "tenant-b=-1", "from 0 to 10"),
        ("demand", "tenant-b=lots", "'lots' is not a number"),
    ],
)
def test_bad_options_are_refused_in_one_line(kind: str, text: str, message: str) -> None:
    parse = {"add": parse_add, "remove": parse_remove, "share": parse_share, "demand": parse_demand}[kind]
    with pytest.raises(InvalidRequest) as caught:
        parse(text)
    assert message in str(caught.value) and "\n" not in str(caught.value) and text in str(caught.value)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "changes nothing"),
        ({"share": ["a=1", "a=2"]}, "'a' is given twice"),
        ({"horizon": "0d"}, "--horizon '0d': must be above 0"),
        ({"horizon": "soon"}, "--horizon 'soon'"),
        ({"add": ["h100:8x1"] * 65}, "at most 64"),
    ],
)
def test_a_scenario_is_refused_when_empty_repeated_or_oversized(fields: dict, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        scenario("s", **fields)


@pytest.mark.parametrize("name", ["today", "", "-x", "a b", "x" * 41])
def test_a_scenario_name_is_short_plain_and_not_today(name: str) -> None:
    with pytest.raises(InvalidRequest, match="scenario name"):
        scenario(name, add=["a100:8x1"])


def test_a_scenario_file_in_toml_or_yaml() -> None:
    toml = '[[scenario]]\nname = "more"\nadd_nodes = ["h100:8x4"]\n\n[[scenario]]\nname = "grow"\ndemand = "*=1.2"\n'
    yaml = "scenarios:\n  - {name: more, add_nodes: [h100:8x4]}\n  - {name: grow, demand: '*=1.2', trend: 30d}\n"
    (more, grow) = scenarios_from_text(toml, "s.toml")
    assert more.add_nodes == (NodeChange("h100", 4, 8),) and grow.demand == (("*", 1.2),)
    (more, grow) = scenarios_from_text(yaml, "s.yaml")
    assert more.name == "more" and grow.trend_horizon_s == 30 * 86400.0


@pytest.mark.parametrize(
    ("text", "source", "message"),
    [
        ("[[scenario]]\nname = 1\n", "s.toml", "'name' (a string) is required"),
        ("[[scenario]]\nname = 'x'\nnodes = ['a']\n", "s.toml", "unknown key 'nodes'"),
        ("[[scenario]\n", "s.toml", "not valid TOML"),
        ("scenarios: [", "s.yaml", "not valid YAML"),
        ("other: []", "s.yaml", "expected one list"),
        ("scenarios: []", "s.yaml", "non-empty list"),
        ("scenarios:\n" + "  - {name: s, add_nodes: a100:8x1}\n" * 17, "s.yaml", "17 scenarios, at most 16"),
        ("#" * (65 * 1024), "s.yaml", "larger than 64 KiB"),
        ("scenarios:\n  - {name: s, add_nodes: [1]}\n", "s.yaml", "'add_nodes' must be a string or a list"),
    ],
)
def test_a_bad_scenario_file_is_refused(text: str, source: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        scenarios_from_text(text, source)
    assert message in str(caught.value) and str(caught.value).startswith(source) and "\n" not in str(caught.value)


# --- applying: cluster, demand, trend ------------------------------------------------------------------------------


def _two_types() -> ClusterSpec:
    groups = [
        NodeGroup(name="a-small", count=1, gpus=8, gpu_type="a100", cpus=16, memory=64000, switch="leaf1"),
        NodeGroup(name="a-big", count=3, gpus=8, gpu_type="a100", cpus=64, memory=512000, switch="leaf2",
                  partitions=["a100", "gpu"]),
        NodeGroup(name="t4", count=2, gpus=4, gpu_type="t4", cpus=8, memory=32000, switch="leaf1"),
    ]
    return ClusterSpec(name="two", node_groups=groups, switch_parent={"leaf1": "spine", "leaf2": "spine"})


def test_added_nodes_copy_the_largest_group_of_their_type() -> None:
    edited = edit_cluster(_two_types(), [NodeChange("a100", 4, 8)], [])
    added = edited.node_groups[-1]
    assert (added.count, added.gpus, added.gpu_type, added.cpus, added.memory_mib, added.switch, added.partitions) == (
        4, 8, "a100", 64, 512000, "leaf2", ["a100", "gpu"])
    assert edited.node_count() == 10 and edited.gpus_by_type() == {"a100": 64, "t4": 8}
    assert len({node.name for node in edited.iter_nodes()}) == 10  # every node keeps a name of its own


def test_nodes_of_a_type_the_site_lacks_cannot_be_added() -> None:
    with pytest.raises(InvalidRequest, match=r"--add-nodes h100:8x4: the cluster has no h100 node .* \(types: a100, t4\)"):
        edit_cluster(_two_types(), [NodeChange("h100", 4, 8)], [])


def test_removed_nodes_come_from_the_largest_group_and_never_more_than_exist() -> None:
    edited = edit_cluster(_two_types(), [], [NodeChange("a100", 2)])
    assert {g.name: g.count for g in edited.node_groups} == {"a-small": 1, "a-big": 1, "t4": 2}
    edited = edit_cluster(_two_types(), [], [NodeChange("a100", 4)])
    assert {g.name for g in edited.node_groups} == {"t4"}  # emptied groups vanish
    with pytest.raises(InvalidRequest, match="--remove-nodes a100:5: the cluster has 4 a100 nodes"):
        edit_cluster(_two_types(), [], [NodeChange("a100", 5)])
    with pytest.raises(InvalidRequest, match="the cluster has 0 4-GPU a100 nodes"):
        edit_cluster(_two_types(), [], [NodeChange("a100", 1, 4)])
    with pytest.raises(InvalidRequest, match="removes every node"):
        edit_cluster(_two_types(), [], [NodeChange("a100", 4), NodeChange("t4", 2)])


def test_a_cluster_past_the_bound_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="at most 10,000"):
        edit_cluster(_two_types(), [NodeChange("a100", MAX_NODES, 8)], [])


def test_demand_scaling_copies_every_second_row_deterministically() -> None:
    rows = [row(f"a{i}", i * 100.0, "acme") for i in range(6)] + [row("b0", 50.0, "beta")]
    scaled = scale_demand(rows, {"acme": 1.5}, 86400.0)
    assert scaled == scale_demand(rows, {"acme": 1.5}, 86400.0)  # the same rows every time
    acme = [r for r in scaled if r.tenant == "acme"]
    assert len(acme) == 9 and [r.job_id for r in scaled if r.tenant == "beta"] == ["b0"]
    copies = {r.job_id: r.submit_time for r in acme if "~" in r.job_id}
    # row i is replayed floor((i+1)·1.5) − floor(i·1.5) times: rows 1, 3, 5 twice; a copy lands halfway to the next
    assert copies == {"a1~1": 150.0, "a3~1": 350.0, "a5~1": 550.0}  # a5's next: its mean gap, 100 s on
    assert len({r.job_id for r in scaled}) == len(scaled)  # fresh ids
    assert [r.job_id for r in scale_demand(rows, {"acme": 0.5}, 86400.0) if r.tenant == "acme"] == ["a1", "a3", "a5"]
    assert len(scale_demand(rows, {"acme": 2.0, "beta": 2.0}, 86400.0)) == 14
    assert [r.job_id for r in scale_demand(rows, {"acme": 0.0}, 86400.0)] == ["b0"]


def test_every_tenant_and_one_tenant_factors_multiply() -> None:
    rows = [row(f"a{i}", i * 100.0, "acme") for i in range(4)] + [row(f"b{i}", i * 100.0, "beta") for i in range(4)]
    found = scenario("s", demand=["*=2", "beta=0.5"])
    applied = apply_scenario(found, inputs(rows))
    tenants = [r.tenant for r in applied.inputs.rows]
    assert (tenants.count("acme"), tenants.count("beta")) == (8, 4)
    assert applied.notes == ["demand: 8 rows -> 12 (acme ×2)"]
    with pytest.raises(InvalidRequest, match="the demand of 'acme' would grow ×12"):
        apply_scenario(scenario("s", demand=["*=4", "acme=3"]), inputs(rows))


def test_the_trend_is_the_least_squares_rate_projected_past_the_window() -> None:
    # 2, 4, 6, 8 rows on days 0–3: slope 2/day, mean 5/day at day 2; at 4 + 3 days: 5 + 2·(7 − 2) = 15 → ×3
    rows = [row(f"d{day}-{n}", day * 86400.0 + n, "acme") for day in range(4) for n in range(2 * (day + 1))]
    trend = fit_trend(rows, 4.5 * 86400.0, 3 * 86400.0)
    assert (trend.days, trend.mean_per_day, trend.slope_per_day) == (4, 5.0, 2.0)
    assert trend.projected_per_day == pytest.approx(15.0) and trend.factor == pytest.approx(3.0)
    assert "5.0 rows (tasks) eligible per day over 4 whole days, +2.00 rows/day per day" in trend.explain()
    applied = apply_scenario(scenario("s", horizon="3d"), inputs(rows, days=4.5))
    assert applied.trend == trend and len(applied.inputs.rows) == 3 * len(rows)
    with pytest.raises(InvalidRequest, match="--trend needs at least 2 whole days of history"):
        fit_trend(rows, 1.5 * 86400.0, 86400.0)


def test_unknown_tenants_are_refused_before_any_simulation() -> None:
    rows = congested_rows(4)
    with pytest.raises(InvalidRequest, match=r"--share: 'nobody' is not a tenant .* \(known: acme, beta\)"):
        what_if(export(rows), inputs(rows), [scenario("s", share=["nobody=5"])], PERIOD)
    with pytest.raises(InvalidRequest, match="two scenarios are named 's'"):
        what_if(export(rows), inputs(rows), [scenario("s", demand=["*=2"])] * 2, PERIOD)


# --- what-if on a congested history: the direction of each change -------------------------------------------------


@pytest.fixture(scope="module")
def congested() -> list:
    return congested_rows(24)


def test_added_nodes_shorten_the_waits_and_removed_nodes_lengthen_them(congested: list) -> None:
    result = what_if(export(congested), inputs(congested), [scenario("more", add=["a100:8x1"]),
                                                             scenario("fewer", remove=["a100:1"])], PERIOD)
    today, (more, fewer) = result.today, [o.figures for o in result.outcomes]
    assert today.overall.mean > 0
    for tenant in ("acme", "beta"):
        assert more.tenants[tenant].mean < today.tenants[tenant].mean < fewer.tenants[tenant].mean
        assert more.tenants[tenant].p95 < today.tenants[tenant].p95 < fewer.tenants[tenant].p95
    assert (today.capacity_gpus, more.capacity_gpus, fewer.capacity_gpus) == (16, 24, 8)
    assert (today.largest_gang, more.largest_gang, fewer.largest_gang) == ({"a100": 16}, {"a100": 24}, {"a100": 8})
    # today's replay is the calibration's own: its figures are the simulated side, the record beside them
    assert result.calibration.mean.sim == pytest.approx(today.overall.mean)
    assert result.calibration.rows == today.rows == len(congested)
    data = result.as_dict()
    assert data["scenarios"][0]["delta_vs_today"]["overall"]["mean_queue_s"]["change"] < 0
    assert data["scenarios"][1]["delta_vs_today"]["overall"]["mean_queue_s"]["relative"] > 0


def test_a_larger_share_moves_waiting_to_the_other_tenant(congested: list) -> None:
    # Slurm's multifactor order gives each place in line to a tenant by its weighted fair share
    multifactor = metasched_config(tenant_order="multifactor")
    result = what_if(export(congested), inputs(congested, multifactor),
                     [scenario("acme-first", share=["acme=10"]), scenario("beta-first", share=["beta=10"])], PERIOD)
    today, (acme_first, beta_first) = result.today, [o.figures for o in result.outcomes]
    assert acme_first.tenants["acme"].mean < today.tenants["acme"].mean < acme_first.tenants["beta"].mean
    assert beta_first.tenants["beta"].mean < today.tenants["beta"].mean < beta_first.tenants["acme"].mean
    assert all(WEIGHTS_IDLE not in o.applied.notes for o in result.outcomes)


def test_under_the_shipped_policy_a_share_change_is_said_to_move_nothing(congested: list) -> None:
    result = what_if(export(congested), inputs(congested), [scenario("s", share=["acme=10"])], PERIOD)
    (outcome,) = result.outcomes
    assert WEIGHTS_IDLE in outcome.applied.notes
    assert outcome.figures.tenants == result.today.tenants


def test_more_demand_lengthens_the_waits(congested: list) -> None:
    result = what_if(export(congested), inputs(congested), [scenario("s", demand=["beta=1.5"])], PERIOD)
    (outcome,) = result.outcomes
    assert outcome.figures.rows == 30 and outcome.figures.tenants["beta"].jobs == 18
    assert outcome.figures.tenants["beta"].mean > result.today.tenants["beta"].mean


# --- the figures: largest gang, stranded GPUs ----------------------------------------------------------------------


def test_the_largest_gang_stays_under_one_top_switch() -> None:
    groups = [NodeGroup(name="a", count=2, gpus=8, gpu_type="a100", switch="leaf1"),
              NodeGroup(name="b", count=1, gpus=8, gpu_type="a100", switch="leaf2"),
              NodeGroup(name="c", count=3, gpus=8, gpu_type="a100", switch="leaf3"),
              NodeGroup(name="t", count=2, gpus=4, gpu_type="t4", switch="leaf1"),
              NodeGroup(name="u", count=1, gpus=6, gpu_type="t4", switch="leaf1")]
    # leaf1 and leaf2 under spine1 (24 a100), leaf3 alone (24 a100); t4: 4 + 4 + 6 -> workers of 4 fit 3 nodes (12),
    # of 2 GPUs: 2 + 2 + 3 workers (14)
    cluster = ClusterSpec(name="x", node_groups=groups, switch_parent={"leaf1": "spine1", "leaf2": "spine1"})
    assert largest_gang(cluster) == {"a100": 24, "t4": 14}
    flat = ClusterSpec(name="flat", node_groups=[NodeGroup(name="n", count=3, gpus=8)])
    assert largest_gang(flat) == {"untyped": 24}


def test_free_gpus_while_a_job_waits_are_stranded() -> None:
    # one 8-GPU node: a 4-GPU job runs 1000 s from 0; an 8-GPU job waits for it with 4 GPUs free
    rows = [row("small", 0.0, gpus=4, duration=1000.0), row("big", 100.0, gpus=8, duration=100.0)]
    one = ClusterSpec(name="one", node_groups=[NodeGroup(name="n", count=1, gpus=8, gpu_type="a100")])
    run_ = replay(rows, one, {"acme": 1.0}, None, PERIOD)
    free, waited = stranded(run_.raw)
    assert free == pytest.approx(4.0) and waited == pytest.approx(900.0, abs=2 * PERIOD)


# --- the command ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """store is a SQLite store holding the congested history of a day ago, and its inventory of two a100 nodes."""
    base: datetime = (utcnow() - timedelta(days=1)).replace(microsecond=0)
    yield congested_store(tmp_path_factory.mktemp("what-if") / "store.sqlite", base)


def test_what_if_prints_today_and_the_scenario_side_by_side(store: str) -> None:
    result = run(store, "plan", "what-if", "--since", "14d", "--add-nodes", "a100:8x2", "--share", "acme=50")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[2].split() == ["figure", "today", "calib.", "error", "scenario", "Δ"]
    acme = next(line for line in lines if line.startswith("acme mean delay")).split()
    assert acme[3:6] == ["45.8", "min", "+0%"] and acme[-1] == "-100%"
    assert next(line for line in lines if line.startswith("GPUs (nodes)")).split()[2:] == ["16", "(2)", "32", "(4)",
                                                                                           "+16"]
    assert "scenario: --add-nodes a100:8x2 --share acme=50" in lines
    assert any(WEIGHTS_IDLE in line for line in lines)
    assert any(line.startswith("verdict on today's replay: simulated mean queue delay within ") for line in lines)


def test_what_if_json_has_today_the_calibration_and_each_scenario(store: str, tmp_path: Path) -> None:
    scenarios = tmp_path / "s.yaml"
    scenarios.write_text("scenarios:\n  - {name: fair, share: acme=10, policy_config: multi.yaml}\n")
    (tmp_path / "multi.yaml").write_text("tenant_order: multifactor\n")
    result = run(store, "plan", "what-if", "--since", "14d", "--remove-nodes", "a100:1", "--name", "smaller",
                 "--scenario-file", str(scenarios), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"window", "jobs", "cluster", "policy", "period_s", "calibration", "today", "scenarios", "definitions",
            "notes"} <= set(data)
    assert data["calibration"]["verdict"].startswith("simulated mean queue delay within")
    assert data["today"]["capacity_gpus"] == 16 and set(data["today"]["tenants"]) == {"acme", "beta"}
    smaller, fair = data["scenarios"]
    assert (smaller["scenario"]["name"], smaller["changes"]) == ("smaller", ["--remove-nodes a100:1"])
    assert smaller["figures"]["capacity_gpus"] == 8 and smaller["delta_vs_today"]["capacity_gpus"]["change"] == -8
    assert smaller["delta_vs_today"]["overall"]["mean_queue_s"]["change"] > 0
    assert set(smaller["figures"]) >= {"tenants", "overall", "gpu_utilization", "stranded_gpus", "waiting_share",
                                       "largest_gang_gpus", "rows", "replayed", "unplaced"}
    # the scenario's policy file is read beside the scenario file; under multifactor the weight acts
    assert fair["scenario"]["policy_config"] == str(tmp_path / "multi.yaml")
    tenants = fair["delta_vs_today"]["tenants"]
    assert tenants["acme"]["mean_queue_s"]["change"] < 0 < tenants["beta"]["mean_queue_s"]["change"]


def test_what_if_plots_are_png_files(store: str, tmp_path: Path) -> None:
    folder = tmp_path / "plots"
    result = run(store, "plan", "what-if", "--since", "14d", "--add-nodes", "a100:8x1", "--plot", str(folder))
    assert result.exit_code == 0, result.output
    written = sorted(folder.iterdir())
    assert [path.name for path in written] == ["queue_delay_by_tenant.png", "utilization.png"]
    for path in written:
        assert path.stat().st_size > 1000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plots written: " in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "nothing to compare"),
        (["--add-nodes", "h100:8x4"], "the cluster has no h100 node to copy"),
        (["--add-nodes", "a100:8"], "expected TYPE:GPUSxCOUNT"),
        (["--remove-nodes", "a100:3"], "the cluster has 2 a100 nodes"),
        (["--share", "nobody=5"], "'nobody' is not a tenant"),
        (["--demand", "acme=11"], "from 0 to 10"),
        (["--horizon", "90d", "--add-nodes", "a100:8x1"], "--horizon goes with --trend"),
        (["--trend"], "the demand of 'acme' would grow"),  # a day of jobs in a 14-day window is a steep trend
        (["--name", "x"], "--name names the scenario of"),
        (["--name", "today", "--add-nodes", "a100:8x1"], "scenario name 'today'"),
        (["--scenario-file", "missing.toml"], "cannot read"),
        (["--add-nodes", "a100:8x1", "--scenario-policy", "missing.yaml"], "missing.yaml: cannot read"),
        (["--add-nodes", "a100:8x1", "--until", "15d"], "must be after --since"),
    ],
)
def test_what_if_bad_input_is_one_line_and_exit_2(store: str, args: list[str], message: str) -> None:
    result = run(store, "plan", "what-if", "--since", "14d", *args)
    assert_usage_error(result, message)


def test_what_if_with_no_change_of_a_scenario_changes_nothing(store: str) -> None:
    # --demand *=1 is a scenario whose replay is today's: every delta is zero
    result = run(store, "plan", "what-if", "--since", "14d", "--demand", "*=1", "--json")
    assert result.exit_code == 0, result.output
    (only,) = json.loads(result.stdout)["scenarios"]
    assert only["delta_vs_today"]["overall"]["mean_queue_s"]["change"] == 0
    assert only["figures"]["tenants"] == json.loads(result.stdout)["today"]["tenants"]


def test_a_scenario_object_prints_its_changes() -> None:
    found = Scenario("x", add_nodes=(NodeChange("h100", 4, 8),), remove_nodes=(NodeChange("a100", 2),),
                     policy_file="p.yaml")
    assert found.changes() == ["--add-nodes h100:8x4", "--remove-nodes a100:2", "--scenario-policy p.yaml"]
    assert found.as_dict()["add_nodes"] == [{"gpu_type": "h100", "gpus": 8, "count": 4}]


def test_cluster_available_leaves_out_the_nodes_drained_when_the_inventory_was_saved(tmp_path: Path) -> None:
    base: datetime = (utcnow() - timedelta(days=1)).replace(microsecond=0)
    url = congested_store(tmp_path / "store.sqlite", base, jobs=8, drained=1)
    every = run(url, "plan", "what-if", "--since", "14d", "--add-nodes", "a100:8x1", "--json")
    available = run(url, "plan", "what-if", "--since", "14d", "--cluster", "available", "--add-nodes", "a100:8x1",
                    "--json")
    assert every.exit_code == 0 and available.exit_code == 0, every.output + available.output
    assert json.loads(every.output)["today"]["capacity_gpus"] == 24
    assert json.loads(available.output)["today"]["capacity_gpus"] == 16
    assert json.loads(available.output)["scenarios"][0]["figures"]["capacity_gpus"] == 24

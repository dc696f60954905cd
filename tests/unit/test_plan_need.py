"""``meta.plan.need`` and ``metasched plan need``: the fewest added nodes meeting every goal, one fewer failing, or none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from meta.model.durations import utcnow
from meta.model.errors import InvalidRequest
from meta.plan.need import Goal, fewest, need, parse_goal, parse_node_type
from meta.plan.scenario import scenario
from meta.plan.what_if import what_if
from tests.plan_support import assert_usage_error, congested_rows, congested_store, export, inputs, run

PERIOD = 2.0


def test_goals_and_node_types_parse() -> None:
    assert parse_goal("p95", "tenant-a<=1h") == Goal("tenant-a", "p95", 3600.0)
    assert parse_goal("mean", " tenant-b <= 30m ") == Goal("tenant-b", "mean", 1800.0)
    assert parse_goal("p95", "*<=90") == Goal("*", "p95", 90.0)
    assert parse_node_type("h100:8") == ("h100", 8)


@pytest.mark.parametrize(
    ("stat", "text", "message"),
    [
        ("p95", "tenant-a<1h", "expected TENANT<=DURATION"),
        ("p95", "tenant-a<=", "expected TENANT<=DURATION"),
        ("p95", "tenant-a<=soon", "cannot parse duration 'soon'"),
        ("mean", "tenant-a<=0", "above 0 and at most 366 days"),
        ("mean", "tenant-a<=400d", "above 0 and at most 366 days"),
    ],
)
def test_a_bad_goal_is_refused_in_one_line(stat: str, text: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_goal(stat, text)
    assert message in str(caught.value) and str(caught.value).startswith(f"--{stat} ") and "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ["h100", "h100:0", "h100:65", ":8", "h100:8x4"])
def test_a_bad_node_type_is_refused(text: str) -> None:
    with pytest.raises(InvalidRequest, match="--node-type"):
        parse_node_type(text)


@pytest.mark.parametrize(("threshold", "most", "expected"), [(0, 64, 0), (1, 64, 1), (5, 64, 5), (37, 64, 37),
                                                             (64, 64, 64), (65, 64, None), (3, 2, None)])
def test_the_search_finds_the_least_count_with_few_probes(threshold: int, most: int, expected: int | None) -> None:
    tried: list[int] = []

    def met(n: int) -> bool:
        tried.append(n)
        return n >= threshold

    assert fewest(met, most) == expected
    assert len(tried) == len(set(tried))  # no count is simulated twice
    assert len(tried) <= 2 * most.bit_length() + 2  # doubling, then bisection
    if expected:
        assert expected in tried and expected - 1 in tried  # the answer is met and one fewer is not, both simulated


@pytest.fixture(scope="module")
def congested() -> list:
    return congested_rows(24)


def test_need_finds_the_fewest_nodes_and_one_fewer_fails(congested: list) -> None:
    goals = [parse_goal("p95", "acme<=20m")]
    result = need(export(congested), inputs(congested), goals, [("a100", 8)], 64, PERIOD)
    (search,) = result.searches
    assert result.best is search and search.found is not None and search.found >= 1
    count = search.found
    found, fewer = search.probe(count), search.probe(count - 1)
    assert found is not None and found.met and found.values[0] <= 1200
    assert fewer is not None and not fewer.met and fewer.values[0] > 1200
    assert result.simulations == 1 + search.simulations
    # checked apart from the search: the same scenarios through what-if
    fewer_nodes = [scenario("fewer", add=[f"a100:8x{count - 1}"])] if count > 1 else []  # else: today
    check = what_if(export(congested), inputs(congested), [scenario("n", add=[f"a100:8x{count}"]), *fewer_nodes],
                    PERIOD)
    at_count = check.outcomes[0].figures.tenants["acme"].p95
    at_fewer = (check.outcomes[1].figures if fewer_nodes else check.today).tenants["acme"].p95
    assert at_count <= 1200 < at_fewer


def test_need_says_none_when_no_count_up_to_the_bound_meets_the_goal(congested: list) -> None:
    goals = [parse_goal("p95", "acme<=20m"), parse_goal("mean", "beta<=1s")]
    result = need(export(congested), inputs(congested), goals, [("a100", 8)], 1, PERIOD)
    assert result.best is None and result.searches[0].found is None
    assert [p.nodes for p in result.searches[0].probes] == [0, 1]
    data = result.as_dict()
    assert data["answer"] is None and data["simulations"] == 2


def test_need_is_zero_when_today_meets_the_goal(congested: list) -> None:
    result = need(export(congested), inputs(congested), [parse_goal("p95", "*<=10h")], [("a100", 8)], 64, PERIOD)
    assert result.best is not None and result.best.found == 0 and result.simulations == 1


@pytest.mark.parametrize(
    ("goal", "types", "most", "message"),
    [
        ("nobody<=1h", [("a100", 8)], 64, "--p95 nobody: the tenant has no rows in the window (known: acme, beta)"),
        ("acme<=1h", [("h100", 8)], 64, "--node-type h100:8: the cluster has no h100 node"),
        ("acme<=1h", [("a100", 8)], 0, "--max-nodes must be from 1 to 10,000"),
        ("acme<=1h", [], 64, "--node-type"),
    ],
)
def test_need_refuses_bad_goals_and_offers_before_simulating(congested: list, goal: str, types: list, most: int,
                                                            message: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        need(export(congested), inputs(congested), [parse_goal("p95", goal)], types, most, PERIOD)
    assert message in str(caught.value)


# --- the command ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """store is a SQLite store holding the congested history of a day ago, and its inventory of two a100 nodes."""
    base = (utcnow() - timedelta(days=1)).replace(microsecond=0)
    yield congested_store(tmp_path_factory.mktemp("need") / "store.sqlite", base)


def test_need_prints_the_answer_and_the_simulations(store: str) -> None:
    result = run(store, "plan", "need", "--since", "14d", "--p95", "acme<=20m", "--mean", "beta<=40m",
                 "--node-type", "a100:8")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == "goals: acme p95 ≤ 20.0 min; beta mean ≤ 40.0 min"
    assert lines[2].startswith("today's replay: acme p95 87.1 min, not met; beta mean 45.8 min, not met")
    assert lines[3].startswith("a100:8: 2 nodes meet every goal (") and "; 1 node does not; tried 1, 2" in lines[3]
    assert "answer: add 2 a100:8 nodes" in lines
    assert any(line.startswith("simulations: 3 (today's replay included)") for line in lines)


def test_need_json_has_the_answer_and_each_probe(store: str) -> None:
    result = run(store, "plan", "need", "--since", "14d", "--p95", "acme<=20m", "--node-type", "a100:8", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["answer"] == {"node_type": "a100:8", "nodes": 2} and data["simulations"] == 3
    assert data["goals"] == [{"tenant": "acme", "stat": "p95", "limit_s": 1200.0}]
    assert data["today"]["met"] is False and data["today"]["values_s"][0] > 1200
    (search,) = data["searches"]
    assert [(p["nodes"], p["met"]) for p in search["probes"]] == [(0, False), (1, False), (2, True)]
    assert data["calibration"]["verdict"].startswith("simulated mean queue delay within")


def test_need_exits_1_in_one_line_when_none_meets_the_goal(store: str) -> None:
    result = run(store, "plan", "need", "--since", "14d", "--p95", "acme<=20m", "--node-type", "a100:8",
                 "--max-nodes", "1")
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "metasched: error: no count of up to 1 added nodes (a100:8) meets every goal in simulation (2 simulations; "
        "with 1: acme p95 "), result.stderr
    assert "a100:8: no count up to 1 meets every goal" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--node-type", "a100:8"], "give at least one goal"),
        (["--p95", "acme<=1h"], "one --node-type TYPE:GPUS"),
        (["--p95", "acme<1h", "--node-type", "a100:8"], "expected TENANT<=DURATION"),
        (["--p95", "nobody<=1h", "--node-type", "a100:8"], "the tenant has no rows in the window"),
        (["--p95", "acme<=1h", "--node-type", "h100:8"], "the cluster has no h100 node"),
        (["--p95", "acme<=1h", "--node-type", "a100:8", "--max-nodes", "20000"], "--max-nodes must be from 1"),
        (["--p95", "acme<=1h", "--node-type", "a100"], "expected TYPE:GPUS"),
    ],
)
def test_need_bad_input_is_one_line_and_exit_2(store: str, args: list[str], message: str) -> None:
    result = run(store, "plan", "need", "--since", "14d", *args)
    assert_usage_error(result, message)

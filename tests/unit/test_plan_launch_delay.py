"""The launch through Slurm in ``metasched plan``: measured by the history export, simulated by every replay.

The congested history of ``tests.plan_support`` with a 20 s launch: each job holds its node from
the decision and runs 20 s later, so the recorded delays run to that start. The export measures
the launch (median of started_at − created_at); calibrate, what-if and need simulate it for today
and every scenario alike; ``--launch-delay`` overrides it (0: off).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from meta.model.durations import utcnow
from meta.plan.calibrate import calibrate, replay
from meta.plan.history import HistoryExport, history_rows
from meta.plan.need import Goal, need
from meta.plan.scenario import scenario
from meta.plan.what_if import what_if
from meta.store.db import Database
from tests.plan_support import TENANTS, congested_rows, congested_store, export, inputs, run, site_cluster

PERIOD = 2.0
LAUNCH = 20.0
WEIGHTS = dict.fromkeys(TENANTS, 1.0)


def launched(jobs: int = 24, measured: float = LAUNCH) -> HistoryExport:
    """launched is the congested history with a LAUNCH s launch, its export carrying ``measured`` as the measure."""
    found = export(congested_rows(jobs, LAUNCH))
    found.launch_delay_s, found.launch_attempts = measured, jobs
    return found


# --- the export -----------------------------------------------------------------------------------------------------


def test_the_history_export_measures_the_launch_of_the_window(tmp_path: Path) -> None:
    base = (utcnow() - timedelta(days=1)).replace(microsecond=0)
    url = congested_store(tmp_path / "store.sqlite", base, jobs=6, launch_s=LAUNCH)
    database = Database(url)
    try:
        with database.session() as session:
            found = history_rows(session, base, None)
    finally:
        database.dispose()
    assert (found.launch_delay_s, found.launch_attempts) == (LAUNCH, 6)
    # the recorded delays run to Slurm's RUNNING, the launch included: the rows of congested_rows(6, LAUNCH)
    assert [r.queue_delay_s for r in found.rows] == [r.queue_delay_s for r in congested_rows(6, LAUNCH)]
    assert found.rows[0].queue_delay_s == LAUNCH  # the first job waited for nothing but its launch


def test_without_a_launch_the_measure_is_zero(tmp_path: Path) -> None:
    base = (utcnow() - timedelta(days=1)).replace(microsecond=0)
    database = Database(congested_store(tmp_path / "store.sqlite", base, jobs=4))
    try:
        with database.session() as session:
            found = history_rows(session, base, None)
    finally:
        database.dispose()
    assert (found.launch_delay_s, found.launch_attempts) == (0.0, 4)


# --- calibrate, what-if and need ------------------------------------------------------------------------------------


def test_calibrate_simulates_the_measured_launch() -> None:
    history = launched()
    result = calibrate(history, site_cluster(), WEIGHTS, None, PERIOD)
    # FIFO on two nodes, each job holding its node LAUNCH s before it runs: the replay matches the record
    assert result.launch_delay_s == LAUNCH and result.mean.sim == pytest.approx(result.mean.real)
    assert result.p95.sim == pytest.approx(result.p95.real)
    assert result.as_dict()["launch_delay"] == {"simulated_s": LAUNCH, "measured_s": LAUNCH, "measured_attempts": 24}
    assert any(note.startswith("recorded delays include the launch through Slurm") and "measured: 20.00 s, the "
               "median over 24 started attempts" in note and "simulates 20.00 s, the measured one" in note
               for note in result.notes)
    assert not any("a simulated job starts at its decision" in note for note in result.notes)


def test_calibrate_with_no_launch_under_predicts_by_more_than_the_launch() -> None:
    history = launched()
    off = calibrate(history, site_cluster(), WEIGHTS, None, PERIOD, launch_delay_s=0.0)
    on = calibrate(history, site_cluster(), WEIGHTS, None, PERIOD)
    assert off.launch_delay_s == 0 and off.as_dict()["launch_delay"]["measured_s"] == LAUNCH
    # without the launch each node turns over 20 s sooner per job, so the queue grows more slowly
    assert off.mean.sim < on.mean.sim - LAUNCH
    assert any("the replay simulates none (--launch-delay 0): a simulated job starts at its decision" in note
               for note in off.notes)
    given = calibrate(history, site_cluster(), WEIGHTS, None, PERIOD, launch_delay_s=5.0)
    assert given.launch_delay_s == 5 and any("simulates 5.00 s, given (--launch-delay)" in n for n in given.notes)


def test_an_export_without_a_measure_replays_as_before() -> None:
    rows = congested_rows(24)
    result = calibrate(export(rows), site_cluster(), WEIGHTS, None, PERIOD)
    assert result.launch_delay_s == 0 and result.mean.sim == pytest.approx(result.mean.real)
    before = replay(rows, site_cluster(), WEIGHTS, None, PERIOD)  # replay's default: no launch
    assert [j.queue_s for j in before.raw.jobs] == [r.queue_delay_s for r in rows]
    assert any("none measured; the replay simulates none: a simulated job starts at its decision" in note
               for note in result.notes)


def test_what_if_replays_today_and_every_scenario_with_the_same_launch() -> None:
    history = launched()
    # four more nodes: nobody waits for a node, so every job's delay is its launch alone
    more = scenario("more", add=["a100:8x4"])
    result = what_if(history, inputs(history.rows), [more], PERIOD)
    (outcome,) = result.outcomes
    assert result.today_run.launch_delay_s == outcome.run.launch_delay_s == LAUNCH
    assert result.calibration.launch_delay_s == LAUNCH
    assert result.today.overall.mean == pytest.approx(result.calibration.mean.real)
    assert outcome.figures.overall.mean == pytest.approx(LAUNCH) and outcome.figures.overall.p95 == pytest.approx(LAUNCH)
    off = what_if(history, inputs(history.rows), [more], PERIOD, launch_delay_s=0.0)
    assert off.outcomes[0].run.launch_delay_s == off.today_run.launch_delay_s == 0
    assert off.outcomes[0].figures.overall.mean == 0


def test_what_if_counts_a_launching_job_as_placed_not_waiting() -> None:
    # with no contention, nobody waits after a decision: the launch holds GPUs, it waits for no decision
    history = launched()
    result = what_if(history, inputs(history.rows), [scenario("more", add=["a100:8x4"])], PERIOD)
    assert result.outcomes[0].figures.waiting_share == 0 and result.outcomes[0].figures.stranded_gpus == 0


def test_need_probes_every_count_with_the_launch() -> None:
    history = launched()
    # a mean below the launch is met by no count of nodes with it, and by enough nodes without it
    goals = [Goal("*", "mean", LAUNCH - 1)]
    found = need(history, inputs(history.rows), goals, [("a100", 8)], 8, PERIOD)
    assert found.calibration.launch_delay_s == LAUNCH and found.best is None
    (search,) = found.searches
    assert min(p.values[0] for p in search.probes) == pytest.approx(LAUNCH)
    off = need(history, inputs(history.rows), goals, [("a100", 8)], 8, PERIOD, launch_delay_s=0.0)
    assert off.best is not None and off.best.found is not None and off.best.found > 0


# --- the commands ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """store is the congested history of a day ago with a LAUNCH s launch, and its inventory of two a100 nodes."""
    base = (utcnow() - timedelta(days=1)).replace(microsecond=0)
    yield congested_store(tmp_path_factory.mktemp("launch") / "store.sqlite", base, launch_s=LAUNCH)


def test_plan_history_reports_the_launch(store: str, tmp_path: Path) -> None:
    result = run(store, "plan", "history", "--since", "14d", "-o", str(tmp_path / "t.csv"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["launch_delay_s"], data["launch_attempts"]) == (LAUNCH, 24)
    line = run(store, "plan", "history", "--since", "14d", "-o", str(tmp_path / "u.csv"))
    assert "launch delay (decision → RUNNING) 20.00 s, the median of 24 started attempts" in line.stdout


def _calibration(store: str, *options: str) -> dict:
    result = run(store, "plan", "calibrate", "--since", "14d", "--json", *options)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_calibrate_uses_the_measured_launch_unless_told(store: str) -> None:
    measured = _calibration(store)
    assert measured["launch_delay_s"] == LAUNCH
    assert measured["launch_delay"] == {"simulated_s": LAUNCH, "measured_s": LAUNCH, "measured_attempts": 24}
    assert measured["overall"]["mean_queue_s"]["error"] == 0
    off = _calibration(store, "--launch-delay", "0")
    assert off["launch_delay_s"] == 0 and off["launch_delay"]["simulated_s"] == 0
    assert off["overall"]["mean_queue_s"]["error"] < 0
    given = _calibration(store, "--launch-delay", "7.5")
    assert given["launch_delay"]["simulated_s"] == 7.5
    text = run(store, "plan", "calibrate", "--since", "14d").stdout
    assert "period 2 s; launch 20.00 s" in text.splitlines()[0]


@pytest.mark.parametrize("value", ["-1", "nan", "3601"])
def test_a_bad_launch_delay_is_refused(store: str, value: str) -> None:
    result = run(store, "plan", "calibrate", "--since", "14d", "--launch-delay", value)
    assert result.exit_code == 2 and "--launch-delay must be from 0 to 3600 seconds" in result.output


def test_plan_what_if_and_need_take_the_flag(store: str) -> None:
    options = ("--since", "14d", "--add-nodes", "a100:8x4", "--json")
    measured = json.loads(run(store, "plan", "what-if", *options).stdout)
    off = json.loads(run(store, "plan", "what-if", *options, "--launch-delay", "0").stdout)
    assert measured["launch_delay_s"] == LAUNCH and off["launch_delay_s"] == 0
    assert measured["scenarios"][0]["figures"]["overall"]["mean_queue_s"] == LAUNCH
    assert off["scenarios"][0]["figures"]["overall"]["mean_queue_s"] == 0
    goal = ("--since", "14d", "--mean", "*<=19s", "--node-type", "a100:8", "--max-nodes", "8")
    assert run(store, "plan", "need", *goal).exit_code == 1  # nobody starts sooner than its 20 s launch
    found = run(store, "plan", "need", *goal, "--launch-delay", "0")
    assert found.exit_code == 0, found.output
    assert "launch 0.00 s" in found.stdout.splitlines()[0]

"""A pass that reuses a repeat's outcome (meta/policy/repeat.py) makes exactly the plan of the whole pipeline.

Random snapshots whose queues are full of repeats (copies of a task under new ids, in the same
job or another, some throttled), with and without the decision record, with last cycle's holds
carried: the plan with repeats on equals the plan with every task run through the pipeline —
placements, preemptions, holds, every reason, fragmentation and the decisions on record.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meta.policy.config import SchedulerConfig
from meta.policy.plan import carried
from meta.policy.repeat import REPEATS_FROM
from meta.policy.scheduler import SchedulePass, schedule
from meta.policy.snapshot import PendingTask, Snapshot
from tests.policy.builders import NOW, node, running, task
from tests.policy.test_properties import CONFIGS, snapshots

# fields a copy may differ in: each changes some step of the pipeline (aging, fit, preemption, order)
_VARIANTS = (
    lambda t: {},
    lambda t: {"submit_time": t.submit_time - 50_000},
    lambda t: {"runtime_estimate_s": t.runtime_estimate_s * 3},
    lambda t: {"runtime_estimate_s": t.runtime_estimate_s / 30},
    lambda t: {"tenant": "a" if t.tenant != "a" else "b"},
    lambda t: {"preemptible": not t.preemptible},
    lambda t: {"deadline": NOW + 100},
    lambda t: {"priority_class": "evaluation" if t.priority_class != "evaluation" else "training"},
)


@st.composite
def with_repeats(draw, base: Snapshot) -> Snapshot:
    """with_repeats copies each pending task 0-6 times under new ids (same job or not; some throttled; some altered)."""
    pending: list[PendingTask] = []
    for t in base.pending:
        pending.append(t)
        for k in range(draw(st.integers(0, 6))):
            job = t.job_id if draw(st.booleans()) else f"{t.job_id}-copy{k}"
            throttle = draw(st.sampled_from([None, None, None, 1, 2]))
            changes = draw(st.sampled_from(_VARIANTS))(t) if draw(st.booleans()) else {}
            pending.append(
                replace(t, task_id=f"{t.task_id}-copy{k}", job_id=job, max_parallel=throttle, **changes)
            )
    return replace(base, pending=tuple(pending))


def _both(snapshot: Snapshot, config: SchedulerConfig, record: int) -> None:
    """_both asserts the two ways of running the pass give the same plan."""
    memo = schedule(snapshot, config, record=record, repeats=True)
    plain = schedule(snapshot, config, record=record, repeats=False)
    assert memo.placements == plain.placements
    assert memo.preemptions == plain.preemptions
    assert memo.held == plain.held
    assert memo.reasons == plain.reasons
    assert memo.fragmentation == plain.fragmentation
    assert memo.decisions == plain.decisions


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    snapshots(),
    st.one_of(CONFIGS, st.just(SchedulerConfig(short_job_weight=0.0, max_wait_s=3600))),
    st.sampled_from([0, 3]),
    st.data(),
)
def test_repeats_make_the_plan_of_the_whole_pipeline(
    base: Snapshot, config: SchedulerConfig, record: int, data: st.DataObject
) -> None:
    snapshot = data.draw(with_repeats(base))
    _both(snapshot, config, record)
    # next cycle, with this one's holds carried (kept places and bound nodes are never repeats)
    again = replace(snapshot, holds=carried(schedule(snapshot, config).held), now=snapshot.now + 60)
    _both(again, config, record)


def test_a_queue_of_repeats_runs_the_pipeline_once_per_shape() -> None:
    """1,000 shards of one job on a full cluster: one goes through the pipeline, the rest repeat it."""
    nodes = [node(f"n{i}", gpus=8) for i in range(4)]
    busy = [task(f"big{i}", gpus=8) for i in range(4)]
    shards = [replace(task(f"s{i}", gpus=1, submit=NOW - 50), job_id="jshards") for i in range(1000)]
    snapshot = Snapshot(NOW, tuple(nodes), (), (), tuple(busy + shards), {})
    run = SchedulePass(snapshot, SchedulerConfig(), repeats=True)
    for t in snapshot.pending:
        run.schedule_one(t)
    assert len(run.plan.placements) == 4
    assert run.repeats is not None and run.repeats.hits >= 990
    assert len({run.plan.reasons[s.task_id] for s in shards}) == 1


def test_a_shorter_copy_backfills_where_the_long_one_was_blocked() -> None:
    """Runtime is part of a repeat's signature: the short copy of a blocked long task backfills before the held start."""
    nodes = [node("n0", gpus=8)]
    busy = [running("r0", "n0", 6, end=NOW + 3600)]
    gang = task("gang", gpus=8, submit=NOW - 500)
    long = task("long", gpus=1, runtime=40_000)
    again = replace(long, task_id="long-again")  # its outcome is the one a repeat would reuse
    short = replace(long, task_id="long-copy", runtime_estimate_s=60)
    snapshot = Snapshot(NOW, tuple(nodes), tuple(busy), (), (gang, long, again, short), {})
    config = SchedulerConfig(short_job_weight=0.0)  # submit order: the short copy comes after the long ones
    plan = schedule(snapshot, config, repeats=True)
    assert [h.task_id for h in plan.held] == ["gang"]
    assert [p.task_id for p in plan.placements] == ["long-copy"]
    assert plan == schedule(snapshot, config, repeats=False)


def test_repeats_are_reused_by_default_only_on_long_queues() -> None:
    """Below REPEATS_FROM waiting tasks a pass runs each through the pipeline (cheaper there); True or False forces it."""
    nodes = (node("n0", gpus=8),)
    short = Snapshot(NOW, nodes, (), (), tuple(task(f"s{i}") for i in range(REPEATS_FROM - 1)), {})
    long = replace(short, pending=short.pending + (task("last"),))
    assert SchedulePass(short, SchedulerConfig()).repeats is None
    assert SchedulePass(long, SchedulerConfig()).repeats is not None
    assert SchedulePass(short, SchedulerConfig(), repeats=True).repeats is not None
    assert SchedulePass(long, SchedulerConfig(), repeats=False).repeats is None

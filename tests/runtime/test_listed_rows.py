"""Listed rows: squeue's rows parsed once while listed unchanged index exactly as rows parsed afresh each period."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from meta.cycle.reconcile.listed import ListedRows
from meta.cycle.reconcile.observe import Observation, _index_squeue
from meta.model.durations import utcnow
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.parse.tres import Tres
from slurm_bridge.tags import comment, job_name

SITE = "site-a"
_ATTEMPTS = [f"0000000{i}-0000-4000-8000-000000000000" for i in range(4)]


def _row(job_id: int, attempt: str, site: str = SITE) -> SqueueJob:
    """_row is one squeue row of a tagged, running job."""
    return SqueueJob(
        job_id=job_id, name=job_name(attempt), comment=comment(site, attempt), state="RUNNING", account="a",
        qos="normal", partition="gpu", nodelist="n1", nodes=("n1",), tres_alloc=Tres(), tres_per_node=(),
        gres_detail=(), raw_exit_status=None, exit_code=0, signal=None, het_job_id=None, het_job_offset=None,
        array_job_id=None, array_task_id=None, reservation=None, state_reason="None", restart_count=0,
        submit_time=None, start_time=None, end_time=None, user_name="alice", user_id=1001,
    )  # fmt: skip


_CHANGES = {
    "ended": lambda r: replace(r, state="COMPLETED"),
    "failed": lambda r: replace(r, state="FAILED", exit_code=3),
    "killed": lambda r: replace(r, state="CANCELLED", signal=9),
    "moved": lambda r: replace(r, nodes=("n2",), nodelist="n2"),
    "other uid": lambda r: replace(r, user_id=1002),
    "other name": lambda r: replace(r, user_name="bob"),
    "other site": lambda r: replace(r, comment=comment("site-b", _ATTEMPTS[0])),
    "untagged": lambda r: replace(r, name="plain", comment=""),
    "het member": lambda r: replace(r, het_job_id=r.job_id, het_job_offset=1),
    "reason only": lambda r: replace(r, state_reason="Resources"),  # not a sighting's field: parsed once
}


def _index(rows: list[SqueueJob], memo: ListedRows | None) -> tuple[dict, int, set]:
    """_index is the observation's squeue index, foreign count and foreign sites."""
    observation = Observation(at=utcnow())
    index = _index_squeue(rows, SITE, observation, memo)
    return index, observation.foreign, observation.foreign_sites


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 7), st.sampled_from(sorted(_CHANGES))), max_size=4),
                min_size=1, max_size=8))  # fmt: skip
def test_a_kept_parse_indexes_as_a_fresh_one(periods):
    """Whatever rows change, appear or go between listings, the kept parse gives the fresh parse's index."""
    rows = [_row(100 + i, _ATTEMPTS[i % len(_ATTEMPTS)]) for i in range(8)]
    memo = ListedRows()
    assert _index(rows, memo) == _index(rows, None)
    for changes in periods:
        for at, change in changes:
            if at < len(rows):
                rows[at] = _CHANGES[change](rows[at])
        rows.append(_row(200 + len(rows), _ATTEMPTS[len(rows) % len(_ATTEMPTS)]))  # a new job
        rows = rows[1:] if len(rows) > 10 else rows  # an old one leaves squeue (MinJobAge)
        assert _index(rows, memo) == _index(rows, None)


def test_a_row_listed_again_unchanged_is_not_parsed_again():
    """The second listing of the same rows reuses the first one's sightings (the very objects)."""
    rows = [_row(100 + i, attempt) for i, attempt in enumerate(_ATTEMPTS)]
    memo = ListedRows()
    first = memo.parse(rows)
    again = memo.parse([replace(row) for row in rows])  # equal rows, new objects: as a new squeue read gives
    assert all(a[1] is b[1] for a, b in zip(first, again, strict=True))
    ended = memo.parse([replace(rows[0], state="COMPLETED")] + rows[1:])
    assert ended[0][1] is not first[0][1] and ended[0][1].observed.terminal

"""Slurm job states -> observed outcome and failure category (table-driven)."""

import pytest

from slurm_bridge.states import FailureCategory, Outcome, base_state, killed_by, map_state

CASES = [
    # (state, exit code, signal, want outcome, want category, want terminal)
    ("PENDING", None, None, Outcome.PENDING, None, False),
    ("REQUEUED", None, None, Outcome.PENDING, None, False),
    ("CONFIGURING", None, None, Outcome.RUNNING, None, False),
    ("RUNNING", None, None, Outcome.RUNNING, None, False),
    ("COMPLETING", 0, None, Outcome.RUNNING, None, False),
    ("SUSPENDED", None, None, Outcome.RUNNING, None, False),
    ("COMPLETED", 0, None, Outcome.SUCCEEDED, None, True),
    ("FAILED", 3, None, Outcome.FAILED, FailureCategory.USER_ERROR, True),
    ("FAILED", 0, 9, Outcome.FAILED, FailureCategory.UNKNOWN, True),
    ("CANCELLED by 0", 0, None, Outcome.CANCELLED, FailureCategory.CANCELLED, True),
    ("TIMEOUT", 0, None, Outcome.TIMEOUT, FailureCategory.TIMEOUT, True),
    ("DEADLINE", 0, None, Outcome.TIMEOUT, FailureCategory.TIMEOUT, True),
    ("NODE_FAIL", 0, None, Outcome.FAILED, FailureCategory.NODE_FAILURE, True),
    ("BOOT_FAIL", 0, None, Outcome.FAILED, FailureCategory.NODE_FAILURE, True),
    ("PREEMPTED", 0, 15, Outcome.PREEMPTED, FailureCategory.PREEMPTED, True),
    ("OUT_OF_MEMORY", 0, 125, Outcome.OOM, FailureCategory.OOM, True),
    ("SOMETHING_NEW", None, None, Outcome.UNKNOWN, FailureCategory.UNKNOWN, False),
]


@pytest.mark.parametrize(("state", "code", "signal", "want_outcome", "want_category", "want_terminal"), CASES)
def test_map_state(state, code, signal, want_outcome, want_category, want_terminal):
    observed = map_state(state, code, signal)
    assert observed.outcome == want_outcome
    assert observed.category == want_category
    assert observed.terminal == want_terminal
    assert (observed.exit_code, observed.signal) == (code, signal)


@pytest.mark.parametrize(
    ("text", "base"), [("CANCELLED by 0", "CANCELLED"), ("running", "RUNNING"), ("", "")]
)
def test_base_state(text, base):
    assert base_state(text) == base


@pytest.mark.parametrize(
    ("state", "exit_code", "signal", "expected"),
    [
        ("FAILED", 138, None, True),  # srun (or a shell) exited 128+USR1: its task died of USR1
        ("FAILED", 0, 10, True),  # the batch shell itself was killed by USR1
        ("FAILED", 137, None, False),  # 128+KILL
        ("FAILED", 10, None, False),  # exit 10 is the program's own
        ("FAILED", 0, 15, False),
        ("COMPLETED", 0, None, False),  # trapped it and finished
        ("CANCELLED", 0, 10, False),  # ended by scancel, not by the signal
    ],
)
def test_killed_by_the_checkpoint_signal(state, exit_code, signal, expected):
    assert killed_by(map_state(state, exit_code, signal), "USR1") is expected

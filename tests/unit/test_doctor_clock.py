"""metasched doctor, clocks: skew beyond the measurement's own error, with injected skews."""

from __future__ import annotations

from pathlib import Path

from meta.serve.doctor.check import Status
from meta.serve.doctor.clock import ClockSample, clock_check, sdiag_epoch
from tenants.munge import CLOCK_SKEW_S

REPO = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000.0


def sample(skew: float, round_trip: float = 0.02, resolution: float = 0.0, source: str = "store") -> ClockSample:
    """sample is a remote clock read ``skew`` seconds ahead of ours, taken over ``round_trip`` seconds."""
    return ClockSample(source, NOW + skew - resolution / 2 + round_trip / 2, NOW, NOW + round_trip, resolution)


def test_sdiag_gives_slurmctlds_time() -> None:
    assert sdiag_epoch((REPO / "tests/fixtures/slurm/sdiag.txt").read_text()) == 1796231619
    assert sdiag_epoch("Server thread count: 3\n") is None


def test_a_sample_measures_the_skew_and_its_error() -> None:
    read = sample(3.0, round_trip=0.4, resolution=1.0)
    assert abs(read.skew_s - 3.0) < 1e-6 and abs(read.error_s - 0.7) < 1e-6


def test_in_step_passes() -> None:
    check = clock_check([sample(0.2, resolution=1.0, source="slurmctld"), sample(-0.05)], [])
    assert check.status is Status.OK and "slurmctld +0.2s" in check.message


def test_an_injected_skew_past_munges_window_fails_naming_the_clock() -> None:
    check = clock_check([sample(0.1, source="slurmctld"), sample(CLOCK_SKEW_S + 25)], [])
    assert check.status is Status.FAIL and "store's clock is +30.0s" in check.message and "NTP" in check.message
    assert clock_check([sample(-(CLOCK_SKEW_S + 2), source="slurmctld")], []).status is Status.FAIL


def test_a_small_drift_warns() -> None:
    assert clock_check([sample(2.5)], []).status is Status.WARN


def test_a_slow_round_trip_is_not_taken_for_skew() -> None:
    # 6 s apparent skew, but the answer took 4 s to come: it may be 2 s, within the window
    assert clock_check([sample(6.0, round_trip=8.0)], []).status is not Status.FAIL


def test_no_clock_read_warns_with_why() -> None:
    check = clock_check([], ["sdiag: Access/permission denied"])
    assert check.status is Status.WARN and "permission denied" in check.message

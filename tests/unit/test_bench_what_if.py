"""bench_what_if's judgement of a prediction against a measurement (issue 23's 30% rule)."""

from __future__ import annotations

from benchmarks.bench_what_if import _check


def _run(mean: float, tenants: dict[str, float]) -> dict:
    return {"figures": {"queue_delay_s": {"mean": mean}, "tenant_mean_delay_s": tenants}}


def _prediction(today: float, scenario: float) -> dict:
    def figures(mean: float) -> dict:
        return {"overall": {"mean_queue_s": mean}, "tenants": {"a": {"mean_queue_s": mean}}}

    return {"today": figures(today), "scenarios": [{"figures": figures(scenario)}], "calibration": None}


def _met(before: float, after: float, today: float, scenario: float) -> bool:
    check = _check("x", _run(before, {"a": before}), _run(after, {"a": after}), _prediction(today, scenario))
    return check["rows"][0]["met"]


def test_a_change_of_the_predicted_sign_within_30_percent_is_met() -> None:
    assert _met(10.0, 6.8, 9.0, 6.0)  # measured -3.2, predicted -3.0


def test_the_right_sign_but_twice_the_size_is_not_met() -> None:
    assert not _met(14.2, 7.4, 9.5, 6.5)  # measured -6.8, predicted -3.0


def test_the_wrong_sign_is_not_met() -> None:
    assert not _met(10.0, 11.0, 9.0, 6.0)


def test_a_prediction_of_no_change_is_never_met() -> None:
    check = _check("x", _run(7.4, {"a": 7.4}), _run(6.5, {"a": 6.5}), _prediction(6.0, 6.0))
    row = check["rows"][0]
    assert (row["met"], row["same_sign"], row["error"]) == (False, False, None)

"""plot: queue-delay CDF per policy and GPU utilization over time (matplotlib, Agg backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from meta.sim.job import JobState
from meta.sim.run import RunOutcome


class PlotError(RuntimeError):
    """PlotError is raised when matplotlib is missing or the file cannot be written."""


def _pyplot():
    """_pyplot imports matplotlib lazily with the non-interactive Agg backend."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotError("--plot needs matplotlib: pip install 'metasched[plot]'") from exc
    return plt


def _cdf(outcome: RunOutcome) -> tuple[list[float], list[float]]:
    """_cdf is the empirical CDF of measured queue delays (seconds, floored at 1 s for log axes)."""
    delays = sorted(max(j.queue_s, 1.0) for j in outcome.raw.jobs if j.measured and j.state == JobState.DONE)
    n = len(delays) or 1
    return delays, [(i + 1) / n for i in range(len(delays))]


def _utilization(outcome: RunOutcome) -> tuple[list[float], list[float]]:
    """_utilization is busy GPUs / capacity as a step series, time in hours."""
    capacity = outcome.raw.capacity_gpus or 1
    timeline = outcome.raw.ledger.timeline
    return [t / 3600 for t, _ in timeline], [busy / capacity for _, busy in timeline]


def write_plot(outcomes: Sequence[RunOutcome], path: str | Path) -> Path:
    """write_plot draws both panels for every run into one PNG."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for outcome in outcomes:
        name = outcome.report["policy"]
        xs, ys = _cdf(outcome)
        left.step(xs, ys, where="post", label=name)
        ts, us = _utilization(outcome)
        right.step(ts, us, where="post", label=name, linewidth=0.8)
    left.set(xscale="log", xlabel="queue delay (s, ≥1)", ylabel="fraction of jobs", title="Queue delay CDF")
    window = outcomes[0].raw.window
    right.axvspan(window[0] / 3600, window[1] / 3600, color="grey", alpha=0.1, label="measured window")
    # The drain after the last arrival can last weeks (long jobs); show the window and a margin.
    right.set_xlim(0, 1.15 * window[1] / 3600 or None)
    right.set(xlabel="simulated time (h)", ylabel="allocated GPUs / capacity", title="GPU utilization", ylim=(0, 1.05))
    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.legend()
    fig.tight_layout()
    path = Path(path)
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise PlotError(f"cannot write plot {path}: {exc}") from exc
    finally:
        plt.close(fig)
    return path

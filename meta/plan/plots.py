"""Plots of a what-if (matplotlib, Agg, as ``meta.sim.plot``): per-tenant queue-delay CDFs and utilization over time."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from meta.plan.calibrate import Replay
from meta.plan.what_if import Comparison
from meta.sim.plot import PlotError, _pyplot

MAX_TENANT_PANELS = 12  # the busiest tenants get a panel; more would be unreadable
DELAYS_PNG = "queue_delay_by_tenant.png"
UTILIZATION_PNG = "utilization.png"
# who may see each plot of a saved report (meta/store/plan_reports.py): the delays show every tenant's panel
AUDIENCE = {DELAYS_PNG: "admin", UTILIZATION_PNG: "cluster"}


def write_plots(result: Comparison, folder: str | Path) -> list[Path]:
    """write_plots writes both PNGs into ``folder`` (created if missing) and returns their paths."""
    where = Path(folder)
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PlotError(f"cannot create plot folder {where}: {exc.strerror or exc}") from exc
    runs = [("today", result.today_run)] + [(o.scenario.name, o.run) for o in result.outcomes]
    _delays(runs, where / DELAYS_PNG)
    _utilization(runs, where / UTILIZATION_PNG)
    return [where / DELAYS_PNG, where / UTILIZATION_PNG]


def render_plots(result: Comparison) -> list[tuple[str, bytes]]:
    """render_plots is both PNGs in memory, (file name, bytes) each: what ``--save`` stores beside the report."""
    runs = [("today", result.today_run)] + [(o.scenario.name, o.run) for o in result.outcomes]
    found = []
    for name, draw in ((DELAYS_PNG, _delays), (UTILIZATION_PNG, _utilization)):
        buffer = io.BytesIO()
        draw(runs, buffer)
        found.append((name, buffer.getvalue()))
    return found


def _delays(runs: Sequence[tuple[str, Replay]], path: Path | BinaryIO) -> None:
    """_delays draws one panel per tenant: the CDF of its simulated queue delays in every run."""
    plt = _pyplot()
    counts: dict[str, int] = {}
    for row, _ in runs[0][1].placed:
        counts[row.tenant] = counts.get(row.tenant, 0) + 1
    tenants = sorted(counts, key=lambda t: (-counts[t], t))[:MAX_TENANT_PANELS] or ["(none)"]
    columns = min(3, len(tenants))
    lines = math.ceil(len(tenants) / columns)
    fig, axes = plt.subplots(lines, columns, figsize=(4.5 * columns, 3.5 * lines), squeeze=False)
    for panel, tenant in zip(axes.flat, tenants, strict=False):
        for name, run in runs:
            delays = sorted(max(job.queue_s, 1.0) for row, job in run.placed if row.tenant == tenant)
            if delays:
                panel.step(delays, [(i + 1) / len(delays) for i in range(len(delays))], where="post", label=name)
        panel.set(xscale="log", xlabel="queue delay (s, ≥1)", ylabel="fraction of jobs", title=tenant, ylim=(0, 1.02))
        panel.grid(alpha=0.3)
        panel.legend(fontsize="small")
    for panel in list(axes.flat)[len(tenants):]:
        panel.set_visible(False)
    fig.suptitle("Simulated queue delay per tenant")
    _save(plt, fig, path)


def _utilization(runs: Sequence[tuple[str, Replay]], path: Path | BinaryIO) -> None:
    """_utilization draws busy GPUs over each run's own capacity against time."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(10, 4.5))
    for name, run in runs:
        capacity = run.capacity_gpus or 1
        timeline = run.raw.ledger.timeline
        axis.step([t / 3600 for t, _ in timeline], [busy / capacity for _, busy in timeline], where="post",
                  label=f"{name} ({run.capacity_gpus} GPUs)", linewidth=0.9)
    axis.set(xlabel="time since the first eligible row (h)", ylabel="allocated GPUs / capacity",
             title="GPU utilization", ylim=(0, 1.05))
    axis.grid(alpha=0.3)
    axis.legend()
    _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path | BinaryIO) -> None:
    """_save writes the figure as a PNG (to a file or a buffer) and closes it."""
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100, format="png")
    except OSError as exc:
        raise PlotError(f"cannot write plot {path}: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)

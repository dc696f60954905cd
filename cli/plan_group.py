"""``metasched plan``: the store commands that replay history (lazy, ``cli.plan_cmd``) and the saved reports (the API).

``plan history|calibrate|what-if|need`` read the store directly (an admin's commands, like ``db``)
and are imported only when they run. ``plan reports`` and ``plan report ID`` are thin: one request
to the API each (``plan_reports``, ``plan_report``), answered for the caller — an admin sees every
report whole, a tenant's coordinator only its tenant's rows and the cluster-wide figures, anyone
else is refused (meta/service/plan_reports.py).
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any, ClassVar

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.main import LazyGroup
from cli.output import echo_json, echo_table, short_time, table
from meta.model.errors import InvalidRequest

KINDS = ("calibrate", "what-if", "need")
# name -> (module, attribute, the one-line help --help shows without importing the module)
PLAN_LAZY: dict[str, tuple[str, str, str]] = {
    "history": ("cli.plan_cmd", "history", "Export the jobs submitted in a window as a trace CSV for `metasched simulate --trace`."),
    "calibrate": ("cli.plan_cmd", "calibrate_cmd", "Replay the window in the simulator and put its queue delays beside the recorded ones."),
    "what-if": ("cli.plan_cmd", "what_if_cmd", "Replay the window as it was (today) and under each scenario, side by side."),
    "need": ("cli.plan_cmd", "need_cmd", "Find the fewest added nodes of an offered type whose replay of the window meets every goal."),
}  # fmt: skip


class PlanGroup(LazyGroup):
    """PlanGroup is ``plan``: its store commands imported when asked for, its API commands at once."""

    lazy: ClassVar[dict[str, tuple[str, str, str]]] = PLAN_LAZY


@click.group("plan", cls=PlanGroup)
def plan() -> None:
    """Capacity planning from the site's own history (as traces the simulator replays)."""


@plan.command("reports")
@click.option("--kind", type=click.Choice(KINDS), default=None, help="Only reports of this kind.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@pass_state
@handle_errors
def reports(state: CliState, kind: str | None, limit: int, as_json: bool) -> None:
    """List the saved plan reports, newest first (admins; a tenant's coordinator sees its own tenant's rows)."""
    found = state.backend().plan_reports(kind=kind, limit=limit)
    if as_json:
        echo_json(found)
        return
    headers = ["ID", "KIND", "NAME", "SAVED (UTC)", "PLOTS"]
    admin = any("saved_by" in head for head in found)
    if admin:
        headers.insert(4, "BY")
    rows = []
    for head in found:
        row = [head["id"], head["kind"], head["name"], short_time(head["saved_at"]), len(head["plots"])]
        if admin:
            row.insert(4, head.get("saved_by", "-"))
        rows.append(row)
    echo_table(headers, rows)


@plan.command("report")
@click.argument("report_id", type=click.IntRange(1, 2**31 - 1), metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (as the API answers it).")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), default=None,
              help="Write the report's PNG plots you may see into this folder.")
@pass_state
@handle_errors
def report(state: CliState, report_id: int, as_json: bool, plot_dir: str | None) -> None:
    """Show one saved plan report: its figures per tenant and cluster-wide (a coordinator: its own tenant's rows)."""
    found = state.backend().plan_report(report_id, plots=bool(plot_dir))
    if plot_dir:
        written = _write_plots(found.pop("plots", []), Path(plot_dir))
        found["plots"] = [{"name": name, "path": str(path)} for name, path in written]
        click.echo("plots written: " + (", ".join(str(path) for _, path in written) or "none you may see"), err=True)
    if as_json:
        echo_json(found)
        return
    click.echo(report_text(found))


def _write_plots(plots: list[dict[str, Any]], folder: Path) -> list[tuple[str, Path]]:
    """_write_plots decodes each PNG into ``folder`` under its own name (a name with a path in it is refused)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidRequest(f"cannot create {folder}: {exc.strerror or exc}") from None
    written = []
    for plot in plots:
        name = str(plot.get("name", ""))
        if not name or name != Path(name).name or name.startswith("."):
            raise InvalidRequest(f"the API named a plot {name!r}: not a plain file name")
        try:
            data = base64.b64decode(plot.get("png_base64", ""), validate=True)
        except (binascii.Error, ValueError):
            raise InvalidRequest(f"the API's plot {name!r} is not base64") from None
        path = folder / name
        try:
            path.write_bytes(data)
        except OSError as exc:
            raise InvalidRequest(f"cannot write {path}: {exc.strerror or exc}") from None
        written.append((name, path))
    return written


def report_text(found: dict[str, Any]) -> str:
    """report_text is a saved report for people: its head, what it ran on, the figures table, then changes and notes."""
    context = found.get("context") or {}
    window = context.get("window") or {}
    scope = found.get("scope")
    whose = "every tenant" if scope == "all" else "tenant " + ", ".join(scope or []) + " (cluster-wide figures beside)"
    lines = [f"plan report {found['id']}: {found['kind']} {found['name']!r}, saved {short_time(found['saved_at'])}"
             + (f" by {found['saved_by']}" if found.get("saved_by") else "") + f"; rows of {whose}"]
    if window:
        lines.append(f"window {short_time(window.get('since'))} – {short_time(window.get('until'))}; cluster: "
                     f"{context.get('cluster', '-')}; period {context.get('period_s', '-')} s; launch "
                     f"{context.get('launch_delay_s', '-')} s")
    figures = found.get("figures") or {}
    lines += ["", figures_table(figures)]
    for name, changes in zip(figures.get("runs", [])[1:], figures.get("changes") or [], strict=False):
        lines.append(f"{name}: {' '.join(changes) or '(changes not shown)'}")
    answer = figures.get("answer")
    if found.get("kind") == "need":
        lines.append("answer: " + ("no count of nodes met every goal" if not answer else
                                   f"add {answer.get('nodes')} node(s) of {answer.get('node_type')}"))
    if figures.get("verdict"):
        lines.append(f"verdict: {figures['verdict']}")
    lines += [f"  - {note}" for note in figures.get("notes") or []]
    plots = [plot["name"] for plot in found.get("plots") or []]
    if plots:
        lines.append(f"plots: {', '.join(plots)} (--plot DIR writes them)")
    return "\n".join(lines)


def figures_table(figures: dict[str, Any]) -> str:
    """figures_table is the figures as one table: a line per figure, a column per run (and the calibration error)."""
    if figures.get("goals") is not None:
        rows = [[f"{g['tenant']} {g['stat']}", duration(g.get("limit_s")), duration(g.get("today_s")),
                 "met" if g.get("met") else "not met"] for g in figures["goals"]]
        return table(["goal", "limit", "today", ""], rows) if rows else "(no goal of your tenants)"
    runs = list(figures.get("runs") or [])
    headers = ["figure", *runs, "calib. error"]
    rows = []
    for row in figures.get("tenants") or []:
        rows.append([f"{row['tenant']} mean delay", *map(duration, row.get("mean_s") or []), percent(row.get("mean_error"))])
        rows.append([f"{row['tenant']} p95 delay", *map(duration, row.get("p95_s") or []), percent(row.get("p95_error"))])
    overall = figures.get("overall")
    if overall:
        rows.append(["overall mean delay", *map(duration, overall.get("mean_s") or []), percent(overall.get("mean_error"))])
        rows.append(["overall p95 delay", *map(duration, overall.get("p95_s") or []), percent(overall.get("p95_error"))])
    rows.append(["GPU utilization", *(share(v) for v in figures.get("gpu_utilization") or []),
                 percent(figures.get("utilization_error"))])
    rows.append(["stranded GPUs", *(number(v) for v in figures.get("stranded_gpus") or []), ""])
    rows.append(["GPUs", *(number(v) for v in figures.get("capacity_gpus") or []), ""])
    return table(headers, rows)


def duration(seconds: Any) -> str:
    """duration prints seconds in the unit that reads best (s, min, h, d), a dash for none."""
    if not isinstance(seconds, int | float):
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def percent(error: Any) -> str:
    """percent prints a relative error as a signed percentage, ``n/a`` without one."""
    return f"{error:+.0%}" if isinstance(error, int | float) else "n/a"


def share(value: Any) -> str:
    """share prints a fraction as a percentage, a dash for none."""
    return f"{value:.1%}" if isinstance(value, int | float) else "-"


def number(value: Any) -> str:
    """number prints a count or a mean, a dash for none."""
    if not isinstance(value, int | float):
        return "-"
    return f"{value:g}" if float(value).is_integer() else f"{value:.1f}"

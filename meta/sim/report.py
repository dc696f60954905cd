"""report: the human table and the Markdown table of one or more runs (same figures as JSON)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Row = tuple[str, Callable[[dict[str, Any]], str]]


def secs(value: float) -> str:
    """secs renders seconds with thousands separators (``3,025 s``)."""
    return f"{value:,.0f} s"


def pct(value: float) -> str:
    """pct renders a fraction as a percentage with one decimal."""
    return f"{100 * value:.1f}%"


def _m(report: dict[str, Any]) -> dict[str, Any]:
    return report["metrics"]


ROWS: list[Row] = [
    ("cluster", lambda r: f"{r['cluster']['name']} ({r['cluster']['nodes']} nodes, {r['cluster']['gpus']} GPUs)"),
    ("contention", lambda r: r["contention"]),
    ("jobs measured / rejected", lambda r: f"{_m(r)['jobs']['completed_measured']} / {_m(r)['jobs']['rejected']}"),
    ("queue delay mean", lambda r: secs(_m(r)["queue"]["mean"])),
    ("queue delay p50", lambda r: secs(_m(r)["queue"]["p50"])),
    ("queue delay p95", lambda r: secs(_m(r)["queue"]["p95"])),
    ("queue delay p99", lambda r: secs(_m(r)["queue"]["p99"])),
    ("queue delay max", lambda r: secs(_m(r)["queue"]["max"])),
    ("max queue ≥64 GPUs (n)", lambda r: f"{secs(_m(r)['big_jobs']['queue']['max'])} ({_m(r)['big_jobs']['n']})"),
    ("JCT mean", lambda r: secs(_m(r)["jct"]["mean"])),
    ("JCT p50", lambda r: secs(_m(r)["jct"]["p50"])),
    ("JCT p95", lambda r: secs(_m(r)["jct"]["p95"])),
    ("JCT p99", lambda r: secs(_m(r)["jct"]["p99"])),
    ("GPU utilization busy / useful", lambda r: f"{pct(_m(r)['utilization'])} / {pct(_m(r)['useful_utilization'])}"),
    ("physical bound (mean JCT ÷ mean run time)", lambda r: f"{_m(r)['physical_bound']:.2f}"),
    ("makespan", lambda r: f"{_m(r)['makespan_s'] / 3600:,.1f} h"),
    ("preemptions / lost GPU-h (with restores)", lambda r: f"{_m(r)['preemptions']} / {_m(r)['lost_gpu_hours']:,.1f}"),
    ("Jain's index (share-normalised)", lambda r: f"{_m(r)['fairness']['jain']:.4f} ({_m(r)['fairness']['tenants']} tenants)"),
    ("worst tenant mean queue ×slurm-like", lambda r: worst_cell(r)),
    ("stranded GPUs mean / p95", lambda r: f"{_m(r)['stranded_gpus']['mean']:.1f} / {_m(r)['stranded_gpus']['p95']:.0f}"),
    ("policy cycles", lambda r: f"{_m(r)['cycles']:,}"),
    ("policy time / wall time", lambda r: f"{_m(r)['policy_s']:.1f} s / {_m(r)['wall_s']:.1f} s"),
]


def worst_cell(report: dict[str, Any]) -> str:
    """worst_cell is ``tenant ratio×`` of the run's worst-off tenant, ``-`` without a slurm-like run."""
    section = report.get("tenant_delays") or {}
    if section.get("baseline") == report["policy"]:
        return "(baseline)"  # every tenant is 1.00× against itself: no worst to name
    worst = section.get("worst")
    return "-" if worst is None else f"{worst['tenant']} {worst['ratio']:.2f}×"


def _aligned(rows: Sequence[Sequence[str]]) -> str:
    """_aligned left-aligns columns separated by two spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows)


def human_table(reports: Sequence[dict[str, Any]]) -> str:
    """human_table renders one column per policy, one row per figure."""
    rows = [["", *(r["policy"] for r in reports)]]
    rows += [[label, *(fn(r) for r in reports)] for label, fn in ROWS]
    return _aligned(rows)


def group_table(reports: Sequence[dict[str, Any]], group: str) -> str:
    """group_table renders mean / p99 queue delay per job kind or tenant, one column per policy."""
    names = sorted({name for r in reports for name in _m(r)[group]})
    rows = [[group.removeprefix("by_"), *(f"{r['policy']} queue mean / p99" for r in reports)]]
    for name in names:
        cells = []
        for r in reports:
            entry = _m(r)[group].get(name)
            cells.append("-" if entry is None else f"{secs(entry['queue']['mean'])} / {secs(entry['queue']['p99'])}")
        rows.append([name, *cells])
    return _aligned(rows)


def notes(reports: Sequence[dict[str, Any]]) -> list[str]:
    """notes lists the distinct caveats of the runs (warm-up, rounding, estimates, contention)."""
    seen: list[str] = []
    for r in reports:
        for note in [*r["notes"], f"contention: {r['contention']}"]:
            if note not in seen:
                seen.append(note)
    return seen


def markdown(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """markdown renders a GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _tenant_cell(entry: dict[str, Any] | None, worst: bool, bold: bool) -> str:
    """_tenant_cell is ``mean / p95 / max s · share · ratio×`` of one tenant in one run."""
    if entry is None:
        return "-"
    share = "-" if entry["share_ratio"] is None else f"{entry['share_ratio']:.2f}"
    ratio = "-" if entry["ratio"] is None else f"{entry['ratio']:.2f}×"
    if worst:  # the policy's worst-off tenant
        ratio = f"**{ratio}**" if bold else f"{ratio} ◀ worst"
    delays = f"{entry['mean_s']:,.0f} / {entry['p95_s']:,.0f} / {entry['max_s']:,.0f}"
    return f"{delays} · {share} · {ratio}"


def tenant_rows(reports: Sequence[dict[str, Any]], bold: bool = False) -> tuple[list[str], list[list[str]]]:
    """tenant_rows is the per-tenant table's header and rows: one column per policy (``tenant_delays``)."""
    sections = [r.get("tenant_delays") or {"tenants": {}, "worst": None} for r in reports]
    # the baseline against itself has no worst tenant worth marking
    marked = [None if s.get("baseline") == r["policy"] or s["worst"] is None else s["worst"]["tenant"]
              for s, r in zip(sections, reports, strict=True)]
    names = sorted({name for s in sections for name in s["tenants"]})
    jobs = {name: max(s["tenants"][name]["jobs"] for s in sections if name in s["tenants"]) for name in names}
    header = ["tenant (jobs)", *(r["policy"] for r in reports)]
    rows = []
    for name in sorted(names, key=lambda n: (-jobs[n], n)):
        cells = [_tenant_cell(s["tenants"].get(name), mark == name, bold) for s, mark in zip(sections, marked, strict=True)]
        rows.append([f"{name} ({jobs[name]:,})", *cells])
    return header, rows


def tenant_table(reports: Sequence[dict[str, Any]], as_markdown: bool = False) -> str:
    """tenant_table renders the per-tenant figures (tenants with ≥ min_jobs jobs), worst tenant marked."""
    header, rows = tenant_rows(reports, bold=as_markdown)
    if not rows:
        return ""
    section = next((r["tenant_delays"] for r in reports if r.get("tenant_delays")), {})
    legend = (
        f"tenants with ≥ {section.get('min_jobs')} jobs; each cell: queue delay mean / p95 / max (s) · share ratio "
        f"(received ÷ fair GPU-time, capped at 1: what Jain's index is over) · mean ×slurm-like (both means "
        f"floored at {section.get('floor_s', 0):g} s)"
    )
    return (markdown(header, rows) if as_markdown else _aligned([header, *rows])) + "\n" + legend

"""The web view's page bodies: data from ``meta.service.web.data`` and the API's views, as escaped markup."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from meta.service.web.data import ClusterMap, ClusterTable, History, NodeView, TenantRow, Visible, sees
from meta.service.web.render import badge, bar, color_of, esc, kv, link, sparkline, state_badge, table, when


def _node(node: NodeView, tenants: Sequence[str], stranded: bool) -> str:
    """_node is one node's card: a square per GPU coloured by the tenant holding it."""
    squares = []
    for holding in node.holdings:
        who = f"{holding.tenant} {holding.job or ''} {holding.user or ''}".strip()
        squares += [f'<span class="gpu held" style="background:{color_of(holding.tenant, tenants)}" '
                    f'title="{esc(who)}"></span>'] * holding.gpus  # fmt: skip
    free_class = "gpu stranded" if stranded else "gpu"
    squares += [f'<span class="{free_class}" title="free"></span>'] * node.free
    squares += ['<span class="gpu" style="background:#999" title="unavailable"></span>'] * (node.gpus - node.held - node.free)
    jobs = ", ".join(_holder(key, gpus) for key, gpus in _by_holder(node).items()) or "-"
    state = "" if node.state == "up" else " " + badge(node.state, "bad" if node.state == "down" else "warn")
    return (f'<div class="node {esc(node.state)}"><strong>{esc(node.name)}</strong>{state}'
            f'<span class="muted"> {node.held}/{node.gpus} held</span>'
            f'<div class="gpus">{"".join(squares)}</div><div class="muted">{jobs}</div></div>')  # fmt: skip


def _by_holder(node: NodeView) -> dict[tuple[str, str | None], int]:
    """_by_holder is GPUs held per (tenant, job) on one node: a job visible to the caller, else its tenant only."""
    held: dict[tuple[str, str | None], int] = {}
    for h in node.holdings:
        held[(h.tenant, h.job)] = held.get((h.tenant, h.job), 0) + h.gpus
    return held


def _holder(key: tuple[str, str | None], gpus: int) -> str:
    tenant, job = key
    return f"{link(f'/web/jobs/{job}', job) if job else esc(tenant)} ({gpus})"


def cluster_body(cmap: ClusterMap, tenants: Sequence[str]) -> str:
    """cluster_body is the cluster map: GPU types, their switches, each node's GPUs and holders, and fragmentation."""
    frag = cmap.fragmentation
    stranded_total = int(frag.get("stranded_gpus") or 0)
    legend = "".join(f'<span><span class="swatch" style="background:{color_of(t, tenants)}"></span>{esc(t)}</span>'
                     for t in tenants)  # fmt: skip
    legend += ('<span><span class="swatch" style="background:#dfe6ee"></span>free</span>'
               '<span><span class="swatch gpu stranded"></span>stranded (free, no waiting shape fits)</span>')
    parts = [f'<div class="box legend">{legend}</div>']
    for gpu_type, switches in cmap.groups.items():
        nodes = [n for group in switches.values() for n in group]
        total, free = sum(n.gpus for n in nodes), sum(n.free for n in nodes)
        parts.append(f"<h2>{esc(gpu_type)} <span class=\"muted\">— {total} GPUs, {free} free, "
                     f"{total - free} held or unavailable</span></h2><div>")  # fmt: skip
        for switch, group in switches.items():
            cards = "".join(_node(n, tenants, stranded_total > 0) for n in group)
            spine = group[0].spine if group else "-"
            parts.append(f'<div class="switch"><div class="muted">switch <strong>{esc(switch)}</strong>'
                         f' (under {esc(spine)})</div><div class="grid">{cards}</div></div>')  # fmt: skip
        parts.append("</div>")
    if not cmap.groups:
        parts.append('<p class="muted">no inventory yet: no daemon has read Slurm\'s nodes (is `metasched serve` running?)</p>')
    largest = frag.get("largest_placeable_gang_gpus")
    parts.append("<h2>Fragmentation (last cycle)</h2>" + table(
        ["free GPUs", "stranded GPUs", "largest gang placeable now (GPUs)", "free by type (Slurm jobs of others taken out)", "cycle at", "inventory at"],
        [[esc(frag.get("free_gpus", "-")), esc(frag.get("stranded_gpus", "-")),
          esc(largest if not isinstance(largest, dict) else ", ".join(f"{k}: {v}" for k, v in largest.items())),
          esc(", ".join(f"{k}: {v}" for k, v in (frag.get("free_by_type") or {}).items()) or "-"),
          when(cmap.cycle_at), when(cmap.inventory_at)]],
    ))  # fmt: skip
    return "".join(parts)


def clusters_body(table_: ClusterTable, admin: bool) -> str:
    """clusters_body is one row per Slurm cluster: drained (by whom and since: admins), nodes, GPUs, live attempts."""
    if not table_.rows:
        return ('<p class="muted">This site has one Slurm cluster (or no daemon has stored an inventory yet): '
                f'{link("/web/", "the cluster map")} shows all of it.</p>')
    rows = []
    for row in table_.rows:
        drain = table_.drains.get(row.cluster)
        if drain is None:
            drained = badge("no", "ok")
        else:
            # who drained it and since when are an admin's to see, as `metasched cluster list`; the reason
            # is every user's (explain gives it to any job the drain keeps off the cluster)
            who = f" by {esc(drain.drained_by)} since {when(drain.drained_at)}" if admin else ""
            drained = badge("drained", "warn") + who + (f": {esc(drain.reason)}" if drain.reason else "")
        nodes = ", ".join(f"{count} {state}" for state, count in row.nodes.items() if count) or "none"
        gpus = sorted(row.total_gpus)
        rows.append([
            f"<strong>{esc(row.cluster)}</strong>", drained, esc(nodes),
            esc(", ".join(f"{t}: {row.total_gpus[t]}" for t in gpus) or "-"),
            esc(", ".join(f"{t}: {row.free_gpus.get(t, 0)}" for t in gpus) or "-"), str(row.running_attempts),
        ])  # fmt: skip
    note = ('<p class="muted">From the store: the inventory the daemon last read from Slurm '
            f"({when(table_.inventory_at)} UTC), the live attempts and the admins' drains. Nodes are in Slurm's "
            "states; free GPUs are the schedulable nodes' GPUs no live attempt of metasched holds (Slurm jobs of "
            "others are not taken out here). Whether a cluster answers right now is not in the store: the daemon "
            "exports it as <code>metasched_slurm_cluster_up</code> and "
            "<code>metasched_slurm_cluster_dark_seconds</code>; a dark cluster's row shows what it last answered.</p>")
    return table(["cluster", "drained", "nodes", "GPUs by type", "free GPUs by type", "live attempts"], rows,
                 numeric=(5,)) + note


def queues_body(rows: Sequence[TenantRow], hist: History, tenants: Sequence[str]) -> str:
    """queues_body is each tenant's waiting and running work, fair share against usage, and 24 h sparklines."""
    body = []
    for r in rows:
        ratio = r.ratio
        kind = "ok" if ratio is None or ratio <= 1.05 else "warn" if ratio <= 2 else "bad"
        name = f"<strong>{esc(r.name)}</strong>" + (" " + badge("yours") if r.mine else "")
        quotas = ", ".join(f"{k}={v}" for k, v in r.guaranteed.items()) or "-"
        limits = ", ".join(f"{k}={v}" for k, v in r.limits.items()) or "-"
        body.append([
            name, str(r.waiting), str(r.running), str(r.held_gpus), f"{r.weight:g}",
            f"{bar(r.fair_share, color=color_of(r.name, tenants))} {r.fair_share:.0%}",
            f"{bar(r.usage_share, color=color_of(r.name, tenants))} {r.usage_share:.0%}",
            badge("-" if ratio is None else f"{ratio:.2f}", kind), esc(quotas), esc(limits),
            sparkline(hist.gpus.get(r.name, [0.0] * len(hist.pending)), color=color_of(r.name, tenants),
                      label=f"{r.name} GPUs held"),
        ])  # fmt: skip
    headers = ["tenant", "waiting tasks", "running tasks", "GPUs held", "weight", "fair share", "usage share",
               "usage / share", "guaranteed", "limits", "GPUs held, last 24 h"]  # fmt: skip
    note = (f'<p class="muted">Fair share: the tenant\'s Slurm Fairshare over all tenants\'. Usage share: its decayed '
            f"GPU-seconds over all tenants' (the scheduler's half-life). Sparklines: mean GPUs held per "
            f"{(hist.end - hist.start).total_seconds() / 60 / max(1, len(hist.pending)):.0f}-minute bucket, from "
            f"the attempts' start and end times, {when(hist.start)} to {when(hist.end)} UTC, each scaled to its peak.</p>")
    pending = sparkline(hist.pending, width=480, height=48, label="pending tasks")
    return (table(headers, body, numeric=(1, 2, 3, 4), empty="no tenants yet") + note
            + f"<h2>Pending tasks, every tenant, last 24 h</h2><div class=\"box\">{pending}"
            f'<div class="muted">mean of the cycle records in each bucket (peak {max(hist.pending or [0]):.0f})</div></div>')


def jobs_body(jobs: Sequence[dict[str, Any]]) -> str:
    """jobs_body lists the newest jobs the caller may see, each linking to its page."""
    rows = [[link(f"/web/jobs/{j['short_id']}", j["short_id"]), esc(j["name"]), esc(j["tenant"]), esc(j["kind"]),
             state_badge(j["state"]), esc(" ".join(f"{k}:{v}" for k, v in j["tasks"].items())), when(j["submitted_at"])]
            for j in jobs]  # fmt: skip
    return table(["job", "name", "tenant", "kind", "state", "tasks", "submitted (UTC)"], rows, empty="no jobs you may see")


def job_body(status: dict[str, Any], explain: dict[str, Any], logs: dict[str, str], ahead: int,
             history: dict[str, Any] | None, visible: Visible) -> str:  # fmt: skip
    """job_body is one job: summary, why it waits and what would help, its tasks' attempts with log paths, history."""
    spec = status["spec"]
    summary = kv([
        ("job", f"<code>{esc(status['short_id'])}</code> <span class=\"muted\">{esc(status['id'])}</span>"),
        ("name", esc(status["name"])), ("tenant / queue", esc(f"{status['tenant']} / {status['queue']}")),
        ("kind / priority", esc(f"{status['kind']} / {status['priority_class']}")),
        ("state", state_badge(status["state"])), ("submitted (UTC)", when(status["submitted_at"])),
        ("resources", esc(_resources(spec))),
    ])  # fmt: skip
    why = [[esc(t["task"]), esc(t["name"]), state_badge(t["state"]), badge(t["code"] or "-", "warn" if t["code"] else ""),
            esc(t["message"]), esc(t["remedy"] or "-"),
            (link(f"/web/jobs/{t['blocking_job']}", t["blocking_job"]) if t.get("blocking_job") else "-")
            + (f" ({esc(t['blocking_tenant'])})" if t.get("blocking_tenant") else ""), when(t.get("at"))]
           for t in explain["tasks"]]  # fmt: skip
    ahead_line = (f'<p>{ahead} job(s) of {esc(status["tenant"])} with a waiting task were submitted before this one.</p>'
                  if status["state"] == "pending" else "")
    record = decision_record(history, visible)
    attempts = [[esc(task["index"]), esc(a["number"]), state_badge(a["state"]), esc(a["slurm_job_id"] or "-"),
                 esc(", ".join(a["nodes"]) or "-"), when(a["started_at"]), when(a["ended_at"]),
                 esc("-" if a["exit_code"] is None else a["exit_code"]), esc(a["failure_category"] or a["reason"] or ""),
                 f"<code>{esc(logs.get(a['id'], '-'))}</code>"]
                for task in status["task_list"] for a in task["attempts"]]  # fmt: skip
    recent = [[when(t["at"]), esc(t["entity"]), esc(f"{t['from_state']} → {t['to_state']}"), esc(t["reason"]),
               esc(t["actor"])] for t in status["recent_transitions"]]  # fmt: skip
    return (f'<div class="box">{summary}</div>'
            "<h2>Why it waits, and what would make it run</h2>"
            + table(["task", "name", "state", "reason", "message", "what would help", "ahead of it", "since"], why)
            + ahead_line
            + "<h2>Attempts</h2>"
            + table(["task", "#", "state", "Slurm id", "nodes", "started", "ended", "exit", "why", "log"], attempts,
                    empty="no attempt yet")
            + record
            + "<h2>Recent transitions</h2>" + table(["at (UTC)", "entity", "move", "reason", "actor"], recent))  # fmt: skip


def _job_link(job: str | None, tenant: str | None, visible: Visible) -> str:
    """_job_link links a job the caller may open; another tenant's job is named only (its page would be 404)."""
    if job and tenant and sees(visible, tenant):
        return link(f"/web/jobs/{job}", job)
    return esc(job or "-")


def decision_record(history: dict[str, Any] | None, visible: Visible) -> str:
    """decision_record is the decision log's answer to "why did X run before my job" (explain --history)."""
    if history is None:
        return ""
    until = "still waiting" if history["waiting"] else f"until {when(history['until'])}"
    ran = [[esc(r["cycle"]), when(r["at"]), _job_link(r["job"], r["tenant"], visible), esc(r["tenant"]),
            esc(r["why"]) + (" " + badge("backfilled") if r.get("backfilled") else "")]
           for r in history["ran_before"]]  # fmt: skip
    touching = [[esc(t["cycle"]), when(t["at"]), esc(t["decision"]), esc(t["what"]),
                 _job_link(t["other"]["job"], t["other"]["tenant"], visible) + f" ({esc(t['other']['tenant'])})"
                 if t.get("other") else "-", esc(t["reason"])] for t in history["touching"]]  # fmt: skip
    return ("<h2>Decision record</h2>"
            f'<p class="muted">From the decision log (<code>metasched explain {esc(history["job"])} --history</code>): '
            f"waiting since {when(history['since'])}, {esc(until)}; {esc(history['placed_while_waiting'])} other "
            f"placements meanwhile, the newest {len(ran)} shown.</p>"
            + table(["cycle", "at (UTC)", "ran before it", "tenant", "why it went first"], ran,
                    empty="nothing was placed before it while it waited")
            + table(["cycle", "at (UTC)", "decision", "what", "other job", "reason"], touching,
                    empty="no placement, hold or preemption of this job on record"))  # fmt: skip


def _resources(spec: dict[str, Any]) -> str:
    """_resources is the job's shape in one line (gang size or partitions, GPUs and type, time limit)."""
    res = spec.get("resources") or {}
    count = spec.get("workers") or spec.get("partitions") or 1
    count = len(count) if isinstance(count, list) else count
    gpus = f"{res.get('gpus', 0)} × {res.get('gpu_type') or 'any'} GPU"
    limit = spec.get("time_limit_s")
    return f"{count} × ({gpus}), time limit {_duration(limit) if limit else '-'}"


def _duration(seconds: float) -> str:
    """_duration is seconds as ``1d 2h 3m`` (the largest units that apply)."""
    minutes = int(seconds) // 60
    days, hours, mins = minutes // 1440, minutes % 1440 // 60, minutes % 60
    return " ".join(f"{v}{u}" for v, u in ((days, "d"), (hours, "h"), (mins, "m")) if v) or f"{int(seconds)}s"


def admin_body(rows: Sequence[TenantRow], audit_lines: Sequence[dict[str, Any]]) -> str:
    """admin_body is every tenant's settings and the audit trail's newest lines."""
    tenants = [[esc(r.name), f"{r.weight:g}", esc(", ".join(f"{k}={v}" for k, v in r.guaranteed.items()) or "-"),
                esc(", ".join(f"{k}={v}" for k, v in r.limits.items()) or "-"), str(r.held_gpus),
                f"{r.usage_gpu_s / 3600:.1f}", str(r.waiting), str(r.running)] for r in rows]  # fmt: skip
    lines = [[when(a["at"]), esc(a["actor"]), esc(a["action"]), esc(a["tenant"] or "-"), esc(a["subject"]),
              f"<code>{esc(_detail(a['detail']))}</code>"] for a in audit_lines]  # fmt: skip
    return ("<h2>Tenants</h2>" + table(["tenant", "weight", "guaranteed", "limits", "GPUs held", "decayed usage (GPU-h)",
                                        "waiting tasks", "running tasks"], tenants, numeric=(1, 4, 5, 6, 7))
            + f"<h2>Audit trail (newest {len(lines)})</h2>"
            + table(["at (UTC)", "actor", "action", "tenant", "subject", "detail"], lines))  # fmt: skip


def _detail(detail: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v}" for k, v in detail.items())
    return text if len(text) <= 200 else text[:199] + "…"


def message_body(message: str, hint: str = "") -> str:
    """message_body is a short explanation (signed out, link refused, not found) with a hint."""
    return f'<div class="box"><p>{esc(message)}</p>{f"<p>{hint}</p>" if hint else ""}</div>'


SIGN_IN_HINT = ("Run <code>metasched web</code> on a login node: it prints a link, valid for 10 minutes, that signs you "
                "in here. From another machine, forward the port first: <code>ssh -L 9465:127.0.0.1:9465 login-node</code>.")


# --- capacity planning (saved plan reports) -------------------------------------------------------------------------

CAPACITY_HINT = ("Reports are saved by an admin on the server host: <code>metasched plan calibrate --since 14d --save</code>, "
                 "<code>metasched plan what-if --since 14d --add-nodes h100:8x2 --save</code>, "
                 "<code>metasched plan need ... --save</code>.")


def capacity_body(reports: Sequence[dict[str, Any]], scope: Any) -> str:
    """capacity_body is the latest calibration, then the saved scenarios and node searches, each with figures and plots."""
    if scope == "all" or scope is None:
        who = "You see every tenant's rows, the overall figures, notes and every plot (an admin)."
    else:
        who = (f"You see the rows of {esc(', '.join(scope))} (the tenants you coordinate) and the cluster-wide figures "
               "(GPU utilization, stranded GPUs, capacity, the utilization plot); the other tenants' delays and the "
               "overall delays are left out.")
    parts = [f'<p class="muted">{who} {CAPACITY_HINT}</p>']
    sections = (("calibrate", "Latest calibration", "no calibration saved yet"),
                ("what-if", "Saved scenarios", "no scenario saved yet"),
                ("need", "Node searches", "no node search saved yet"))
    for kind, heading, none in sections:
        mine = [r for r in reports if r["kind"] == kind]
        parts.append(f"<h2>{esc(heading)}</h2>")
        parts += [report_block(r) for r in mine] or [f'<p class="muted">{esc(none)}</p>']
    return "".join(parts)


def report_block(report: dict[str, Any]) -> str:
    """report_block is one saved report: its head, what it ran on, its figures, changes, verdict and plots."""
    context = report.get("context") or {}
    window = context.get("window") or {}
    figures = report.get("figures") or {}
    by = f" by {esc(report['saved_by'])}" if report.get("saved_by") else ""
    number = report["id"]
    head = (f'<h3>{link(f"/web/capacity/{number}", f"#{number}")} {esc(report["name"])} '
            f'<span class="muted">{esc(report["kind"])}, saved {when(report["saved_at"])}{by}</span></h3>')
    ran = kv([("window (UTC)", f"{when(window.get('since'))} – {when(window.get('until'))}"),
              ("cluster", esc(context.get("cluster", "-"))),
              ("period / launch", esc(f"{context.get('period_s', '-')} s / {context.get('launch_delay_s', '-')} s"))])
    parts = [f'<div class="box">{head}{ran}', figures_html(figures)]
    runs = list(figures.get("runs") or [])
    for name, changes in zip(runs[1:], figures.get("changes") or [], strict=False):
        parts.append(f"<p><strong>{esc(name)}</strong>: <code>{esc(' '.join(changes) or '(changes not shown)')}</code></p>")
    if report.get("kind") == "need":
        answer = figures.get("answer")
        text = ("no count of nodes met every goal" if not answer
                else f"add {answer.get('nodes')} node(s) of {answer.get('node_type')}")
        parts.append(f"<p>Answer: <strong>{esc(text)}</strong></p>")
    if figures.get("verdict"):
        parts.append(f'<p class="muted">verdict: {esc(figures["verdict"])}</p>')
    for plot in report.get("plots") or []:
        if plot.get("png_base64"):
            parts.append(f'<img class="plot" alt="{esc(plot["name"])}" '
                         f'src="data:image/png;base64,{esc(plot["png_base64"])}">')
    parts.append("</div>")
    return "".join(parts)


def figures_html(figures: dict[str, Any]) -> str:
    """figures_html is the figures table: per tenant mean and p95 delay per run with today's calibration error, then
    the cluster-wide GPU utilization, stranded GPUs and capacity (a node search: its goals instead)."""
    if figures.get("goals") is not None:
        rows = [[esc(f"{g['tenant']} {g['stat']}"), esc(_secs(g.get("limit_s"))), esc(_secs(g.get("today_s"))),
                 badge("met", "ok") if g.get("met") else badge("not met", "bad")] for g in figures["goals"]]
        return table(["goal", "limit", "today", ""], rows, empty="no goal of your tenants")
    runs = list(figures.get("runs") or [])
    rows = []
    for row in figures.get("tenants") or []:
        for stat in ("mean", "p95"):
            rows.append([esc(f"{row['tenant']} {stat} delay"), *(esc(_secs(v)) for v in row.get(f"{stat}_s") or []),
                         esc(_error(row.get(f"{stat}_error")))])
    overall = figures.get("overall")
    if overall:
        for stat in ("mean", "p95"):
            rows.append([esc(f"overall {stat} delay"), *(esc(_secs(v)) for v in overall.get(f"{stat}_s") or []),
                         esc(_error(overall.get(f"{stat}_error")))])
    rows.append(["GPU utilization", *(esc(_share(v)) for v in figures.get("gpu_utilization") or []),
                 esc(_error(figures.get("utilization_error")))])
    rows.append(["stranded GPUs", *(esc(_count(v)) for v in figures.get("stranded_gpus") or []), ""])
    rows.append(["GPUs", *(esc(_count(v)) for v in figures.get("capacity_gpus") or []), ""])
    return table(["figure", *runs, "calibration error"], rows, numeric=range(1, len(runs) + 2))


def _secs(seconds: Any) -> str:
    """_secs prints seconds in the unit that reads best (s, min, h, d), a dash for none."""
    if not isinstance(seconds, int | float):
        return "-"
    for limit, unit, size in ((120, "s", 1), (7200, "min", 60), (2 * 86400, "h", 3600)):
        if seconds < limit:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds / 86400:.1f} d"


def _error(error: Any) -> str:
    return f"{error:+.0%}" if isinstance(error, int | float) else "n/a"


def _share(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, int | float) else "-"


def _count(value: Any) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:g}" if float(value).is_integer() else f"{value:.1f}"

"""HTML building blocks of the web view: the page frame, tables, badges and inline SVG sparklines.

Every value reaches the page through ``esc`` (``html.escape`` with quotes); markup is only ever
built from escaped values and the fixed strings here. No script runs: the pages refresh with a
meta tag, and the Content-Security-Policy the routes send forbids scripts outright.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from html import escape
from typing import Any

CSS = """
*{box-sizing:border-box}body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2733;background:#f4f6f9}
header{background:#1d2f45;color:#fff;padding:8px 20px;display:flex;gap:18px;align-items:center}
header a{color:#cfe3ff;text-decoration:none}header a.on{color:#fff;font-weight:600;border-bottom:2px solid #7fb2ff}
header .who{margin-left:auto;color:#cfd8e3}main{padding:14px 20px;max-width:1400px}
h1{font-size:20px;margin:6px 0 12px}h2{font-size:16px;margin:18px 0 8px}
table{border-collapse:collapse;background:#fff;margin:4px 0 12px;box-shadow:0 1px 2px #0001}
th,td{padding:4px 10px;border-bottom:1px solid #e3e8ee;text-align:left;vertical-align:top}th{background:#eef2f7;font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12px;background:#eef2f7;padding:1px 4px;border-radius:3px}
td strong,td code{white-space:nowrap}.muted{color:#6b7785}.grid{display:flex;flex-wrap:wrap;gap:10px}.switch{background:#fff;padding:8px 10px;margin:0 10px 10px 0;box-shadow:0 1px 2px #0001;display:inline-block;vertical-align:top}
.node{width:190px;border:1px solid #d5dce5;border-radius:4px;padding:6px;background:#fbfcfe}.node.drained{background:#fff6e5}.node.down{background:#fdecec}
.gpus{display:flex;flex-wrap:wrap;gap:2px;margin:4px 0}.gpu{width:18px;height:18px;border-radius:2px;background:#dfe6ee;border:1px solid #c6d0db}
.gpu.held{border-color:#0003}.gpu.stranded{background:repeating-linear-gradient(45deg,#dfe6ee,#dfe6ee 3px,#f6c0c0 3px,#f6c0c0 6px)}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;background:#e3e8ee}.badge.bad{background:#f8d4d4}.badge.ok{background:#d6f0dc}.badge.warn{background:#fbe9c6}
.legend span{margin-right:12px}.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:middle}
table.kv td:first-child{color:#6b7785;white-space:nowrap}img.plot{max-width:100%;background:#fff;box-shadow:0 1px 2px #0001;margin:4px 10px 10px 0}.box{background:#fff;padding:10px 14px;box-shadow:0 1px 2px #0001;margin-bottom:12px}
"""
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f", "#bab0ac", "#ff9da7")
NAV = (("cluster", "/web/", "Cluster"), ("clusters", "/web/clusters", "Clusters"), ("queues", "/web/queues", "Queues"),
       ("jobs", "/web/jobs", "Jobs"))


def esc(value: Any) -> str:
    """esc is ``value`` as HTML text (quotes escaped too: safe inside attributes)."""
    return escape("" if value is None else str(value), quote=True)


def color_of(tenant: str, tenants: Sequence[str]) -> str:
    """color_of is a tenant's colour: its position among all tenants (stable for one page)."""
    index = list(tenants).index(tenant) if tenant in tenants else len(tenants)
    return PALETTE[index % len(PALETTE)]


def page(title: str, body: str, *, user: str | None = None, active: str = "", admin: bool = False,
         refresh_s: int | None = None, capacity: bool | None = None) -> str:  # fmt: skip
    """page is a whole HTML document: the header (navigation, who is signed in) and ``body`` (already markup).

    ``capacity``: link the Capacity page (admins and tenants' coordinators; None: admins only).
    """
    links = list(NAV)
    if admin if capacity is None else capacity:
        links.append(("capacity", "/web/capacity", "Capacity"))
    if admin:
        links.append(("admin", "/web/admin", "Admin"))
    nav = "".join(f'<a href="{esc(href)}" class="{"on" if key == active else ""}">{esc(label)}</a>'
                  for key, href, label in links) if user else ""  # fmt: skip
    who = f'<span class="who">{esc(user)} · <a href="/web/logout">sign out</a></span>' if user else ""
    meta = f'<meta http-equiv="refresh" content="{int(refresh_s)}">' if refresh_s else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">{meta}'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{esc(title)} · metasched</title><style>{CSS}</style></head>"
            f"<body><header><strong>metasched</strong>{nav}{who}</header><main><h1>{esc(title)}</h1>{body}</main>"
            "</body></html>")  # fmt: skip


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, numeric: Iterable[int] = (), empty: str = "none") -> str:
    """table is a table whose cells are already markup; ``numeric`` columns align right."""
    right = set(numeric)
    head = "".join(f'<th class="{"n" if i in right else ""}">{esc(h)}</th>' for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="{"n" if i in right else ""}">{cell}</td>' for i, cell in enumerate(row))
                   + "</tr>" for row in rows)  # fmt: skip
    if not body:
        body = f'<tr><td colspan="{len(headers)}" class="muted">{esc(empty)}</td></tr>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def kv(rows: Iterable[tuple[str, str]]) -> str:
    """kv is a two-column table of labels (escaped here) and values (already markup), without a header."""
    body = "".join(f"<tr><td>{esc(label)}</td><td>{value}</td></tr>" for label, value in rows)
    return f'<table class="kv"><tbody>{body}</tbody></table>'


def badge(text: Any, kind: str = "") -> str:
    """badge is a small rounded label (kind: ok, warn, bad or plain)."""
    return f'<span class="badge {esc(kind)}">{esc(text)}</span>'


def state_badge(state: str) -> str:
    """state_badge colours a job, task or attempt state."""
    kind = {"running": "ok", "succeeded": "ok", "pending": "warn", "scheduled": "warn", "launching": "warn",
            "failed": "bad", "lost": "bad", "cancelled": "bad", "preempted": "bad"}.get(state, "")  # fmt: skip
    return badge(state, kind)


def link(href: str, text: Any) -> str:
    """link is an anchor with an escaped target and text."""
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def when(moment: datetime | str | None) -> str:
    """when is a UTC time as ``YYYY-MM-DD HH:MM:SS``, or a dash."""
    if moment is None:
        return "-"
    text = moment if isinstance(moment, str) else moment.isoformat()
    return esc(text.replace("T", " ")[:19])


def sparkline(values: Sequence[float], *, color: str = "#4e79a7", width: int = 220, height: int = 36,
              label: str = "") -> str:  # fmt: skip
    """sparkline is an inline SVG polyline of ``values`` scaled to its own maximum (its peak is in the title)."""
    if not values:
        return '<span class="muted">no history</span>'
    top = max(values) or 1.0
    step = width / max(1, len(values) - 1)
    points = " ".join(f"{i * step:.1f},{height - 2 - (v / top) * (height - 4):.1f}" for i, v in enumerate(values))
    title = f"{label} peak {max(values):.1f}" if label else f"peak {max(values):.1f}"
    return (f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
            f"<title>{esc(title)}</title>"
            f'<polyline fill="none" stroke="{esc(color)}" stroke-width="1.6" points="{points}"/></svg>')  # fmt: skip


def bar(fraction: float, *, color: str = "#4e79a7", width: int = 120) -> str:
    """bar is a horizontal bar filled to ``fraction`` (clipped to 0..1)."""
    filled = max(0.0, min(1.0, fraction)) * width
    return (f'<svg width="{width}" height="10"><rect width="{width}" height="10" fill="#e3e8ee"/>'
            f'<rect width="{filled:.1f}" height="10" fill="{esc(color)}"/></svg>')

"""Rendering for people (aligned tables) and for scripts (JSON)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click


def echo_json(value: Any) -> None:
    """echo_json prints a value as indented JSON on stdout."""
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """table renders rows as an aligned plain-text table with a header line."""
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(value.ljust(widths[i]) for i, value in enumerate(row)).rstrip() for row in cells]
    return "\n".join(lines)


def echo_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """echo_table prints a table, or a short note when there are no rows."""
    if not rows:
        click.echo("(none)")
        return
    click.echo(table(headers, rows))


def short_time(iso: str | None) -> str:
    """short_time trims an ISO timestamp to ``YYYY-MM-DD HH:MM:SS`` for tables."""
    return iso[:19].replace("T", " ") if iso else "-"

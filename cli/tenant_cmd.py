"""``metasched tenant set|list|show``: weights and GPU quotas, for admins."""

from __future__ import annotations

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table


def _quota_text(quotas: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(quotas.items())) or "-"


@click.group(name="tenant")
def tenant_group() -> None:
    """Manage tenants: fair-share weight, guaranteed GPUs and GPU limits per type."""


@tenant_group.command(name="set")
@click.argument("name")
@click.option("--weight", type=float, default=None, help="Fair-share weight (default 1).")
@click.option("--guaranteed", multiple=True, help="GPU_TYPE=COUNT guaranteed (repeat; '*' = any type).")
@click.option("--limit", "limits", multiple=True, help="GPU_TYPE=COUNT upper limit (repeat; '*' = any type).")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def set_cmd(
    state: CliState,
    name: str,
    weight: float | None,
    guaranteed: tuple[str, ...],
    limits: tuple[str, ...],
    as_json: bool,
) -> None:
    """Create or update a tenant (admins only)."""
    view = state.backend().set_tenant(
        name, weight=weight, guaranteed=list(guaranteed) or None, limits=list(limits) or None
    )
    if as_json:
        echo_json(view)
        return
    click.echo(
        f"tenant {view['name']}: weight {view['weight']:g}, guaranteed {_quota_text(view['guaranteed'])}, "
        f"limit {_quota_text(view['limits'])}"
    )


@tenant_group.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def list_cmd(state: CliState, as_json: bool) -> None:
    """List tenants with their weights, quotas and decayed GPU usage."""
    views = state.backend().tenants()
    if as_json:
        echo_json(views)
        return
    echo_table(
        ["TENANT", "WEIGHT", "GUARANTEED", "LIMIT", "USAGE (GPU-h, decayed)"],
        [
            [
                v["name"],
                f"{v['weight']:g}",
                _quota_text(v["guaranteed"]),
                _quota_text(v["limits"]),
                f"{v['decayed_gpu_seconds'] / 3600:.1f}",
            ]
            for v in views
        ],
    )


@tenant_group.command(name="show")
@click.argument("name")
@pass_state
@handle_errors
def show_cmd(state: CliState, name: str) -> None:
    """Show one tenant as JSON."""
    echo_json(state.backend().tenant(name))

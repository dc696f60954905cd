"""``metasched tenant set|list|show``: weights and GPU quotas, for admins."""

from __future__ import annotations

from dataclasses import asdict

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table
from meta.model.errors import Forbidden
from tenants.quotas import get_tenant, list_tenants, parse_quotas, set_tenant


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
    if not state.principal().is_admin:
        raise Forbidden("only an admin (no --tenant / METASCHED_TENANT) may change tenants")
    with state.service().db.session() as session:
        view = set_tenant(
            session,
            name,
            actor=state.principal().name,
            weight=weight,
            guaranteed=parse_quotas(guaranteed) if guaranteed else None,
            limits=parse_quotas(limits) if limits else None,
        )
    if as_json:
        echo_json(asdict(view))
        return
    click.echo(
        f"tenant {view.name}: weight {view.weight:g}, guaranteed {_quota_text(view.guaranteed)}, limit {_quota_text(view.limits)}"
    )


@tenant_group.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def list_cmd(state: CliState, as_json: bool) -> None:
    """List tenants with their weights, quotas and decayed GPU usage."""
    principal = state.principal()
    with state.service().db.session() as session:
        views = [v for v in list_tenants(session) if principal.may_access(v.name)]
    if as_json:
        echo_json([asdict(v) for v in views])
        return
    echo_table(
        ["TENANT", "WEIGHT", "GUARANTEED", "LIMIT", "USAGE (GPU-h, decayed)"],
        [
            [
                v.name,
                f"{v.weight:g}",
                _quota_text(v.guaranteed),
                _quota_text(v.limits),
                f"{v.decayed_gpu_seconds / 3600:.1f}",
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
    state.principal().require_access(name, f"tenant {name}")
    with state.service().db.session() as session:
        echo_json(asdict(get_tenant(session, name)))

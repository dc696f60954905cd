"""``metasched tenant set|list|show``: weights and GPU quotas, for admins."""

from __future__ import annotations

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table


def _quota_text(quotas: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(quotas.items())) or "-"


def _limits_text(view: dict) -> str:
    """_limits_text is a tenant's limits, with each cluster's own where Slurm's associations differ by cluster."""
    own = view.get("cluster_limits") or {}
    per_cluster = " ".join(f"{cluster}:{_quota_text(limits)}" for cluster, limits in sorted(own.items()))
    return per_cluster or _quota_text(view["limits"])


def _clusters_text(clusters: list[str] | None) -> str:
    """_clusters_text is where a tenant may run, for people: its clusters, or ``any``."""
    return ",".join(clusters) if clusters else "any"


def parse_clusters(value: str | None) -> list[str] | None:
    """parse_clusters reads ``--clusters a,b`` (None: unchanged; ``any`` or empty: [], any cluster again)."""
    if value is None:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    return [] if names in ([], ["any"]) else names


@click.group(name="tenant")
def tenant_group() -> None:
    """Manage tenants: fair-share weight, guaranteed GPUs and GPU limits per type."""


@tenant_group.command(name="set")
@click.argument("name")
@click.option("--weight", type=float, default=None, help="Fair-share weight (default 1).")
@click.option("--guaranteed", multiple=True, help="GPU_TYPE=COUNT guaranteed (repeat; '*' = any type).")
@click.option("--limit", "limits", multiple=True, help="GPU_TYPE=COUNT upper limit (repeat; '*' = any type).")
@click.option("--max-pending", type=int, default=None,
              help="Pending or running tasks of the tenant, all users (-1: none). Slurm's GrpSubmitJobs wins.")
@click.option("--max-pending-per-user", type=int, default=None,
              help="Pending or running tasks of each user (-1: none). Slurm's MaxSubmitJobs wins.")
@click.option("--max-pending-tasks", type=int, default=None,
              help="Pending or running tasks of the tenant, all users (-1: the service's default, 50,000).")
@click.option("--submit-rate", type=float, default=None, help="Tasks per second the tenant may submit (-1: default).")
@click.option("--submit-burst", type=int, default=None, help="Tasks the tenant may submit at once (-1: default).")
@click.option("--allow-class", "allow_classes", multiple=True,
              help="A priority class above their job kind's that members may ask for, e.g. inference-deadline "
                   "(repeat; replaces the list; 'none' clears it). A Slurm QOS of the class's name does the same per user.")
@click.option("--clusters", "clusters", default=None, metavar="NAME[,NAME...]",
              help="The only Slurm clusters the tenant's jobs may run on (replaces the list; 'any' clears it). "
                   "A job's -M list is narrowed to them; one naming none of them is refused.")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def set_cmd(
    state: CliState,
    name: str,
    weight: float | None,
    guaranteed: tuple[str, ...],
    limits: tuple[str, ...],
    max_pending: int | None,
    max_pending_per_user: int | None,
    max_pending_tasks: int | None,
    submit_rate: float | None,
    submit_burst: int | None,
    allow_classes: tuple[str, ...],
    clusters: str | None,
    as_json: bool,
) -> None:
    """Create or update a tenant (admins only)."""
    given = {"max_pending": max_pending, "max_pending_per_user": max_pending_per_user,
             "max_pending_tasks": max_pending_tasks, "rate": submit_rate, "burst": submit_burst}  # fmt: skip
    submit = {key: (None if value == -1 else value) for key, value in given.items() if value is not None}
    classes = [c for c in allow_classes if c != "none"] if allow_classes else None
    view = state.backend().set_tenant(
        name, weight=weight, guaranteed=list(guaranteed) or None, limits=list(limits) or None, submit=submit or None,
        priority_classes=classes, clusters=parse_clusters(clusters),
    )
    if as_json:
        echo_json(view)
        return
    click.echo(
        f"tenant {view['name']}: weight {view['weight']:g}, guaranteed {_quota_text(view['guaranteed'])}, "
        f"limit {_quota_text(view['limits'])}" + _submit_text(view.get("submit_limits") or {})
        + (f", classes allowed {','.join(view['priority_classes'])}" if view.get("priority_classes") else "")
        + (f", clusters {_clusters_text(view.get('clusters'))}" if view.get("clusters") or clusters is not None else "")
    )


def _submit_text(limits: dict) -> str:
    """_submit_text is the submit limits a tenant sets, for ``tenant set``'s line (empty when none)."""
    keys = ("max_pending", "max_pending_per_user", "max_pending_tasks", "rate", "burst")
    shown = [f"{key} {limits[key]:g}" for key in keys if key in limits]
    return f", submit {', '.join(shown)}" if shown else ""


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
        ["TENANT", "WEIGHT", "GUARANTEED", "LIMIT", "CLUSTERS", "USAGE (GPU-h, decayed)"],
        [
            [
                v["name"],
                f"{v['weight']:g}",
                _quota_text(v["guaranteed"]),
                _limits_text(v),
                _clusters_text(v.get("clusters")),
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

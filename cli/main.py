"""The ``metasched`` command."""

from __future__ import annotations

import click

from cli.audit_cmd import audit_cmd
from cli.checkpoint_cmd import checkpoint_group
from cli.context import CliState
from cli.db_cmd import db
from cli.explain_cmd import explain
from cli.jobs_cmd import cancel, list_jobs, retry, status, submit
from cli.outputs_cmd import commit_cmd, outputs
from cli.secret_cmd import secret_group
from cli.serve_cmd import serve
from cli.simulate_cmd import simulate
from cli.tenant_cmd import tenant_group


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    "db_url",
    envvar="METASCHED_DB",
    default=None,
    help="Database URL (postgresql+psycopg://... or sqlite:///path). "
    "Default: METASCHED_DB, else a SQLite file in the XDG data dir.",
)
@click.option(
    "--tenant",
    envvar="METASCHED_TENANT",
    default=None,
    help="Act as a member of this tenant (only its jobs are visible). Default: all tenants.",
)
@click.version_option(package_name="metasched")
@click.pass_context
def cli(ctx: click.Context, db_url: str | None, tenant: str | None) -> None:
    """metasched: a tenant-aware meta-scheduler for ML training, inference and evaluation on Slurm."""
    ctx.obj = CliState(db_url=db_url, tenant=tenant)


for command in (
    submit,
    status,
    list_jobs,
    cancel,
    retry,
    explain,
    outputs,
    commit_cmd,
    checkpoint_group,
    tenant_group,
    secret_group,
    audit_cmd,
    serve,
    simulate,
    db,
):
    cli.add_command(command)


def main() -> None:
    """main is the console-script entry point."""
    cli(prog_name="metasched")

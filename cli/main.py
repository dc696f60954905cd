"""The ``metasched`` command.

Start-up is kept small: the commands users run every day talk to the API through a standard
library client and import neither the store, the models' pydantic layer nor the service. The
daemon's and the operator's commands (``serve``, ``simulate``, ``db``) are imported only when
they run (``LazyGroup``): they pull in SQLAlchemy, Alembic and the cycle.
"""

from __future__ import annotations

import importlib
from typing import ClassVar

import click

from cli.audit_cmd import audit_cmd
from cli.checkpoint_cmd import checkpoint_group
from cli.cluster_cmd import cluster_group
from cli.context import CliState
from cli.explain_cmd import explain
from cli.hold_cmd import hold, release
from cli.job_cmd import job_group
from cli.jobs_cmd import cancel, list_jobs, retry, status, submit
from cli.outputs_cmd import commit_cmd, outputs
from cli.secret_cmd import secret_group
from cli.tenant_cmd import tenant_group
from cli.web_cmd import web
from cli.whoami_cmd import whoami

# name -> (module, attribute, the one-line help --help shows without importing the module)
LAZY: dict[str, tuple[str, str, str]] = {
    "serve": ("cli.serve_cmd", "serve", "Run the scheduler daemon and the API until SIGTERM or SIGINT."),
    "simulate": ("cli.simulate_cmd", "simulate", "simulate replays a job trace on a simulated cluster and reports queue delays, JCT, utilization."),
    "db": ("cli.db_cmd", "db", "Manage the metasched database schema."),
    "plan": ("cli.plan_group", "plan", "Capacity planning from the site's own history (as traces the simulator replays)."),
    "doctor": ("cli.doctor_cmd", "doctor", "Check the site's prerequisites for metasched serve, one line each, saying what to fix."),
}


class LazyGroup(click.Group):
    """LazyGroup imports a heavy subcommand's module only when that subcommand is asked for (``lazy``: which ones)."""

    lazy: ClassVar[dict[str, tuple[str, str, str]]] = LAZY

    def list_commands(self, ctx: click.Context) -> list[str]:
        """list_commands lists eager and lazy commands, sorted."""
        return sorted([*self.commands, *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """get_command returns an eager command, or imports a lazy one."""
        if cmd_name in self.commands or cmd_name not in self.lazy:
            return self.commands.get(cmd_name)
        module, attribute, _ = self.lazy[cmd_name]
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as exc:  # the thin CLI (deploy/install-cli) has click only
            ctx.fail(f"`{ctx.command_path} {cmd_name}` needs the full install (no module {exc.name!r} here): "
                     "run `deploy/install-cli --full`, or `pip install metasched` where it runs")
        command: click.Command = getattr(loaded, attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """format_commands lists every command with its short help, lazy ones from LAZY (no import)."""
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy:
                rows.append((name, click.Command(name, help=self.lazy[name][2]).get_short_help_str(limit)))
            else:
                command = self.commands[name]
                if not command.hidden:
                    rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--api",
    envvar="METASCHED_API",
    default=None,
    help="The metasched API: unix:///run/metasched/api.sock (default) or http://host:9465.",
)
@click.option(
    "--db",
    "db_url",
    envvar="METASCHED_DB",
    default=None,
    help="Local mode, for root on the server host: use this store directly instead of the API "
    "(postgresql+psycopg://... or sqlite:///path). Default: METASCHED_DB.",
)
@click.option(
    "--tenant",
    envvar="METASCHED_TENANT",
    default=None,
    help="Act for one of your tenants (only its jobs are visible). Default: all of yours.",
)
@click.version_option(package_name="metasched")
@click.pass_context
def cli(ctx: click.Context, api: str | None, db_url: str | None, tenant: str | None) -> None:
    """metasched: a tenant-aware meta-scheduler for ML training, inference and evaluation on Slurm."""
    ctx.obj = CliState(db_url=db_url, tenant=tenant, api=api)


for command in (
    submit,
    status,
    list_jobs,
    cancel,
    hold,
    release,
    retry,
    explain,
    outputs,
    commit_cmd,
    checkpoint_group,
    job_group,
    tenant_group,
    cluster_group,
    secret_group,
    audit_cmd,
    whoami,
    web,
):
    cli.add_command(command)


def main() -> None:
    """main is the console-script entry point."""
    cli(prog_name="metasched")

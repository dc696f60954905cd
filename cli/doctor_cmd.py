"""``metasched doctor``: check a site's prerequisites for ``metasched serve`` and say what to fix, one line each.

It takes the daemon's own settings the way ``serve`` does (``--config`` and the same flags, which
override the file; the options are ``serve``'s own objects, so no default is written twice) and the
store as ``serve`` finds it (``--db``, METASCHED_DB, METASCHED_DB_FILE). Run it as the daemon runs,
on the daemon's host. Exit 0 when every check passed (warnings allowed), 1 when one failed, 2 on
bad input. The checks live in ``meta/serve/doctor/``.
"""

from __future__ import annotations

from typing import Any

import click

from cli.context import CliState, pass_state
from cli.errors import EXIT_USAGE, fail, handle_errors
from cli.output import echo_json
from cli.serve_cmd import check_job_api, given_flags, serve, settings_for
from meta.serve.doctor.check import exit_code, line, summary
from meta.serve.doctor.inputs import DoctorInputError, make_inputs
from meta.serve.doctor.run import run_checks

# serve's options the checks read: the same objects, so their flags, environment variables and help are serve's
SHARED = ("config_file", "munge_socket", "job_api", "managed_partitions", "slurm_bin_dir", "api_socket",
          "api_listen", "state_dir")  # fmt: skip


@click.command()
@click.option("--db", "db_url", default=None,
              help="The store serve uses (default: metasched's --db, METASCHED_DB, METASCHED_DB_FILE, as serve).")
@click.option("--slurm-conf", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The site's slurm.conf (default: SLURM_CONF, else /etc/slurm/slurm.conf); Slurm's commands "
              "run with it as SLURM_CONF, and job_submit.lua is looked for beside it.")  # fmt: skip
@click.option("--probe-partition", default=None,
              help="Partition of the node the job API is probed from (srun -N1). Default: Slurm's default partition.")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@pass_state
@handle_errors
def doctor(state: CliState, config_file: str | None, db_url: str | None, slurm_conf: str | None,
           probe_partition: str | None, as_json: bool, **flags: Any) -> None:  # fmt: skip
    """Check the site's prerequisites for metasched serve, one line each, saying what to fix."""
    settings = settings_for(config_file, given_flags(click.get_current_context(), flags))
    check_job_api(settings.job_api)
    try:
        inputs = make_inputs(settings, db_url or state.db_url, slurm_conf, probe_partition)
    except DoctorInputError as exc:
        fail(str(exc), EXIT_USAGE)
        raise  # unreachable: fail exits
    checks = run_checks(inputs)
    code = exit_code(checks)
    if as_json:
        echo_json({"ok": code == 0, "checks": [check.to_dict() for check in checks]})
    else:
        for check in checks:
            click.echo(line(check))
        click.echo(summary(checks))
    click.get_current_context().exit(code)


doctor.params[:0] = [param for param in serve.params if param.name in SHARED]

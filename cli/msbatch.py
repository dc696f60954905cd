"""msbatch submits an sbatch script to metasched: ``msbatch [OPTIONS] script.sh [args...]``.

It reads the script's ``#SBATCH`` block and the command line with sbatch's precedence
(``cli.sbatch_options``), translates them into a JobSpec (``cli.sbatch_translate``), and submits
it through ``meta.service.api.Service``. Output is sbatch's: ``Submitted batch job <id>``, or just
``<id>`` with ``--parsable``. Usage errors (an unsupported option, a bad value, a missing
script or account) exit 2 with ``msbatch: error: ...``; service errors exit 1 (2 for a request
the service calls invalid or unschedulable), never with a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import NoReturn

import click

from cli.errors import EXIT_USAGE, handle_errors
from cli.sbatch_options import (
    SUPPORTED,
    CommandLine,
    Options,
    OptionValue,
    SbatchError,
    merge,
    parse_command_line,
    read_directives,
    read_environment,
)
from cli.sbatch_script import bind_arguments, read_script
from cli.sbatch_translate import Submission, Translation, default_cwd, translate
from meta.service.api import Service
from tenants.identity import local_principal

PROG = "msbatch"


@dataclass(frozen=True)
class Prepared:
    """Prepared is a validated submission: the merged options and their translation."""

    options: Options
    translation: Translation


# --- preparing (pure apart from reading the script) -----------------------------------------


def _has(options: tuple[OptionValue, ...], name: str) -> bool:
    return any(option.name == name for option in options)


def _submission(command: CommandLine, cwd: str) -> tuple[Submission, list[OptionValue]]:
    """_submission reads the script (if any) and its directives; ``--wrap`` has neither."""
    if _has(command.options, "wrap"):
        if command.script is not None:
            raise SbatchError(["--wrap runs a command; do not also give a script or script arguments"])
        return Submission(cwd=cwd), []
    if command.script is None:
        raise SbatchError(
            ["no script given: msbatch [OPTIONS] script.sh [args...] (or --wrap=CMD); see --help"]
        )
    text = read_script(command.script)
    directives = read_directives(text)
    bound = bind_arguments(text, command.args)
    return Submission(cwd=cwd, script_path=command.script, script_text=bound), directives


def prepare(command: CommandLine, environ: dict[str, str], cwd: str) -> Prepared:
    """prepare merges directives, SBATCH_* variables and the command line and translates them."""
    submission, directives = _submission(command, cwd)
    options = merge(directives, read_environment(environ), list(command.options))
    return Prepared(options, translate(options, submission))


# --- output ---------------------------------------------------------------------------------


def _note(options: Options, message: str) -> None:
    if not options.flag("quiet"):
        click.echo(f"{PROG}: note: {message}", err=True)


def _usage_error(problems: list[str]) -> NoReturn:
    for problem in problems:
        click.echo(f"{PROG}: error: {problem}", err=True)
    sys.exit(EXIT_USAGE)


def help_text() -> str:
    """help_text is msbatch's --help: usage, the supported options and pointers to the rules."""
    lines = [
        f"Usage: {PROG} [OPTIONS] script.sh [args...]",
        f"       {PROG} [OPTIONS] --wrap=COMMAND",
        "",
        "Submit an sbatch script to metasched. #SBATCH directives in the script's leading comment",
        "block are read as sbatch does; command-line options win over SBATCH_ACCOUNT, SBATCH_JOB_NAME,",
        "SBATCH_PARTITION, SBATCH_QOS and SBATCH_TIMELIMIT, which win over directives.",
        "Any other sbatch option is refused by name (exit 2).",
        "",
        "Options:",
    ]
    for definition in SUPPORTED.values():
        short = f"-{definition.short}, " if definition.short else "    "
        value = "=VALUE" if definition.takes_value else ""
        lines.append(f"  {short}--{definition.name}{value}".ljust(34) + definition.help)
    lines += [
        "",
        "Kind: --array → inference (one partition per index); otherwise --kind, default training",
        "(workers = --nodes). Translation rules: pydoc cli.sbatch_translate.",
    ]
    return "\n".join(lines)


def _version() -> str:
    try:
        return metadata.version("metasched")
    except metadata.PackageNotFoundError:
        return "unknown"


def _informational(command: CommandLine) -> bool:
    """_informational prints --help/--usage/--version when asked and tells whether it did."""
    if _has(command.options, "help") or _has(command.options, "usage"):
        click.echo(help_text())
        return True
    if _has(command.options, "version"):
        click.echo(f"{PROG} (metasched {_version()})")
        return True
    return False


# --- submitting -----------------------------------------------------------------------------


def submit(prepared: Prepared) -> None:
    """submit stores the spec through the service and prints the job id the way sbatch does."""
    options = prepared.options
    service = Service.open(options.value("db"))
    key = options.value("key")
    result = service.submit(prepared.translation.spec, idempotency_key=key, principal=local_principal())
    if not result.created:
        _note(
            options, f"idempotency key {key!r} already names job {result.job.short_id}; nothing new submitted"
        )
    if options.flag("parsable"):
        click.echo(result.job.short_id)
    else:
        click.echo(f"Submitted batch job {result.job.short_id}")


def _print_spec(prepared: Prepared) -> None:
    spec = prepared.translation.spec.model_dump(mode="json")
    click.echo(json.dumps(spec, indent=2, sort_keys=True))


@click.command(
    name=PROG,
    context_settings={
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
        "help_option_names": [],  # sbatch's -h/--help are parsed with the other options
    },
    add_help_option=False,
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
@handle_errors
def main(argv: tuple[str, ...]) -> None:
    """main is the ``msbatch`` console script (options are sbatch's; see ``msbatch --help``)."""
    try:
        command = parse_command_line(argv)
        if _informational(command):
            return
        prepared = prepare(command, dict(os.environ), default_cwd())
    except SbatchError as exc:
        _usage_error(exc.problems)
    for note in prepared.translation.notes:
        _note(prepared.options, note)
    if prepared.options.flag("test-only"):
        _print_spec(prepared)
        return
    submit(prepared)

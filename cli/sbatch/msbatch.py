"""msbatch submits an sbatch script to metasched: ``msbatch [OPTIONS] script.sh [args...]``.

It reads the script's ``#SBATCH`` block and the command line with sbatch's precedence
(``cli.sbatch.options``), translates them into a JobSpec's fields (``cli.sbatch.translate``) and
sends them to the API (``--api`` / ``METASCHED_API``), which validates and stores the job; with
``--db`` / ``METASCHED_DB`` (root on the server host) it uses the store directly instead. The API
path imports neither the spec models nor the store: ``--test-only`` validates here, so it does.
Output is sbatch's: ``Submitted batch job <id>``, or just ``<id>`` with ``--parsable``. Usage
errors (an unsupported option, a bad value, a missing script or account, a refused spec) exit 2
with ``msbatch: error: ...``; service errors exit 1 (2 for a request the service calls invalid or
unschedulable), never with a traceback.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from dataclasses import dataclass, replace
from importlib import metadata
from typing import NoReturn

import click

from cli.client import API_ENV, DEFAULT_API, ApiClient, ApiError
from cli.context import DB_FILE_ENV
from cli.errors import EXIT_USAGE, SUBMISSION_FAILED, fail, handle_errors, loaded_class, refuse_submission
from cli.remote import ApiBackend
from cli.sbatch.options import (
    ENVIRONMENT,
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
from cli.sbatch.script import bind_arguments, read_script
from cli.sbatch.translate import Submission, Translation, default_cwd, spec_refusal, translate, validated

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


def prepare(command: CommandLine, environ: dict[str, str], cwd: str, *, validate: bool = True) -> Prepared:
    """prepare merges directives, SBATCH_* variables and the command line and translates them.

    With ``validate`` the spec models check the result here (``--test-only``); without, the
    service does when the job is submitted.
    """
    submission, directives = _submission(command, cwd)
    submission = replace(submission, environ=environ)
    options = merge(directives, read_environment(environ), list(command.options))
    return Prepared(options, translate(options, submission, validate=validate))


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
        "block are read as sbatch does; command-line options win over these variables, which win",
        "over directives:",
        *textwrap.wrap(", ".join(ENVIRONMENT) + ".", 92, initial_indent="  ", subsequent_indent="  "),
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
        "Kind: --kind, default training (workers = --nodes). --array: one job of that kind, one task",
        "per index (%N at most N at once; --kind=inference: the indexes are its partitions).",
        "Several clusters: -M a,b keeps the job on those clusters; with one, bare -w/-x names are its",
        'nodes (docs/sbatch.md, "Several clusters (-M)").',
        "Translation rules: pydoc cli.sbatch.translate.",
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


def backend(options: Options) -> ApiBackend:
    """backend is the API (--api, METASCHED_API, the default socket) or, with --db / METASCHED_DB, local mode's in-process API."""
    url = options.value("db") or os.environ.get("METASCHED_DB")
    if url or os.environ.get(DB_FILE_ENV):
        from cli.local import local_backend, open_service

        return local_backend(open_service(url), None)
    address = options.value("api") or os.environ.get(API_ENV) or DEFAULT_API
    return ApiBackend(ApiClient(address))


# what sbatch says for a partition or QOS Slurm does not have (the service names them in these words)
UNKNOWN_NAMES = ("Invalid partition name specified", "Invalid qos specification")


def refuse_unknown_name(message: str) -> None:
    """refuse_unknown_name exits with sbatch's line when the service refused an unknown partition or QOS."""
    for words in UNKNOWN_NAMES:
        if words in message:
            fail(f"{SUBMISSION_FAILED}: {words}", EXIT_USAGE)


def submit(prepared: Prepared, cwd: str) -> None:
    """submit sends the spec to the service and prints the job id the way sbatch does.

    Notes are printed once the job is stored: a refusal is the first thing on stderr.
    """
    options = prepared.options
    key = options.value("key")
    try:
        result = backend(options).submit(spec=prepared.translation.data, key=key, submit_dir=cwd)
    except ApiError as exc:
        refuse_submission(exc)
        refuse_unknown_name(exc.message)
        if exc.error != "SpecError":
            raise
        _usage_error(spec_refusal(exc.problems or [exc.message]))
    except Exception as exc:
        refuse_submission(exc)
        refuse_unknown_name(str(exc))
        spec_error = loaded_class("meta.model.spec", "SpecError")  # local mode validated in this process
        if spec_error is None or not isinstance(exc, spec_error):
            raise
        _usage_error(spec_refusal(exc.problems))  # type: ignore[attr-defined]  # the same words as from the API
    for note in prepared.translation.notes:
        _note(options, note)
    if not result["created"]:
        _note(options, f"idempotency key {key!r} already names job {result['short_id']}; nothing new submitted")
    if options.flag("parsable"):
        click.echo(result["short_id"])
    else:
        click.echo(f"Submitted batch job {result['short_id']}")


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
        cwd = default_cwd()
        prepared = prepare(command, dict(os.environ), cwd, validate=False)
        spec = validated(prepared.translation.data) if prepared.options.flag("test-only") else None
    except SbatchError as exc:
        _usage_error(exc.problems)
    if spec is not None:
        for note in prepared.translation.notes:
            _note(prepared.options, note)
        click.echo(json.dumps(spec.model_dump(mode="json"), indent=2, sort_keys=True))
        return
    submit(prepared, cwd)

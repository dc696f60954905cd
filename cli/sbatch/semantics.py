"""semantics translates the sbatch options that Slurm acts on into the spec's ``sbatch:`` section.

- ``-D/--chdir``: the job's working folder, made absolute against the submit folder.
- ``-o/-e``: sbatch's filename patterns, passed to Slurm as given (relative to the working
  folder, as sbatch does); ``--open-mode``; ``--mail-type``/``--mail-user``.
- ``--export``: ``ALL`` (the default) sends the submitting shell's environment with the job
  (its variables in the spec's ``env``, as sbatch sends it with the job), minus variables
  that are per-shell (``PWD``, ``SHLVL``...), Slurm's and metasched's own, and any that names a
  store; ``NONE`` and lists without ``ALL`` are Slurm's (the user's login environment plus the
  named variables), with ``SLURM_EXPORT_ENV`` as sbatch sets it. ``NAME`` takes its value from
  the submitting shell, ``NAME=value`` sets it.
- ``--requeue``/``--no-requeue``: metasched's retry (``--no-requeue``: one attempt only).
- the task layout (``-n``, ``--ntasks-per-node``, ``-c``) as the user gave it, for Slurm.
- ``-C/--constraint``, ``-w/--nodelist``, ``-x/--exclude``, ``--exclusive``: placement filters
  for the policy (and ``--exclusive``/``--constraint`` for Slurm too); ``-M/--clusters``: the
  clusters the job may run on, which also places bare ``-w``/``-x`` names (``cli.sbatch.clusters``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from cli.sbatch.clusters import parse_clusters, place_nodes
from cli.sbatch.options import Options, SbatchError, parsed
from cli.sbatch.values import parse_count

# variables that belong to the submitting shell, not to the job (bash resets them anyway)
_SHELL_OWN = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "PS1", "PS2", "COLUMNS", "LINES"})
_RESERVED_PREFIXES = ("METASCHED_", "SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "BASH_FUNC_")
_STORE = frozenset({"METASCHED_DB", "METASCHED_DB_FILE", "DATABASE_URL", "PGPASSWORD", "PGPASSFILE", "PGSERVICE"})
_DATABASE_URL = re.compile(r"\s*(postgres(ql)?|sqlite|mysql|mariadb|oracle|mssql|cockroachdb)(\+\w+)?://", re.I)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
MAX_EXPORTED = 240  # the spec holds at most 256 variables; leave room for the job's own
MAX_VALUE_BYTES = 32 * 1024  # the spec's bound on one value: a longer one stays behind
# a prefix may name the cluster: dev2/b-a100n[1-2] (issue 26)
_HOSTLIST = re.compile(r"(?P<prefix>[A-Za-z0-9._/-]*)\[(?P<ranges>[0-9,-]+)\](?P<suffix>[A-Za-z0-9._-]*)")


def _exportable(name: str, value: str) -> bool:
    """_exportable tells whether a submit-shell variable goes with the job under --export=ALL."""
    if name in _SHELL_OWN or name in _STORE or name.startswith(_RESERVED_PREFIXES):
        return False
    if not _ENV_NAME.fullmatch(name) or "\x00" in value or len(value.encode(errors="replace")) > MAX_VALUE_BYTES:
        return False
    return _DATABASE_URL.match(value) is None


def export_env(text: str | None, environ: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """export_env is the job's env for ``--export=text`` and the export mode left for Slurm (None: ALL)."""
    items = [item for item in (text or "ALL").split(",") if item]
    everything = not items or items[0].upper() == "ALL"
    if everything:
        items = items[1:]
    elif len(items) == 1 and items[0].upper() == "NONE":
        return {"SLURM_EXPORT_ENV": "NONE"}, "NONE"
    env = {name: value for name, value in environ.items() if _exportable(name, value)} if everything else {}
    if len(env) > MAX_EXPORTED:
        raise SbatchError([f"--export=ALL: the environment has {len(env)} variables, more than {MAX_EXPORTED}; "
                           "use --export=NONE or --export=NAME,..."])  # fmt: skip
    for item in items:
        name, has_value, value = item.partition("=")
        if not _ENV_NAME.fullmatch(name) or name.startswith("METASCHED_"):
            raise SbatchError([f"invalid --export={text}: {name!r} is not a variable name metasched can pass"])
        if has_value:
            env[name] = value
        elif name in environ:
            env[name] = environ[name]
    if text is not None:
        env["SLURM_EXPORT_ENV"] = text  # sbatch sets it whenever --export is given (srun in the job reads it)
    if everything and items:
        # sbatch loads the login environment under any --export but a bare ALL (measured: ALL,X=1 sets
        # it); the job's environment here is already the user's login one beneath the shell's variables
        env["SLURM_GET_USER_ENV"] = "1"
    return env, None if everything else "NONE"


def expand_hostlist(text: str) -> list[str]:
    """expand_hostlist reads ``a100n[1-2],t4n1`` into node names."""
    names: list[str] = []
    for part in re.split(r",(?![^\[]*\])", text.strip()):
        match = _HOSTLIST.fullmatch(part)
        if not match:
            names.append(part)
            continue
        for item in match.group("ranges").split(","):
            first, _, last = item.partition("-")
            width = len(first)
            for number in range(int(first), int(last or first) + 1):
                names.append(f"{match.group('prefix')}{number:0{width}d}{match.group('suffix')}")
    return [name for name in names if name]


def _open_mode(options: Options) -> str | None:
    option = options.get("open-mode")
    if option is None:
        return None
    value = (option.value or "").strip().lower()
    for mode in ("append", "truncate"):
        if value and mode.startswith(value):
            return mode
    raise SbatchError([f"invalid {option.where()}: expected append or truncate"])


def placement_fields(options: Options) -> dict[str, Any]:
    """placement_fields are ``clusters`` (-M) and the ``-w``/``-x`` node names placed on them (``cli.sbatch.clusters``)."""
    fields: dict[str, Any] = {}
    clusters_option = options.get("clusters")
    clusters = parsed(clusters_option, parse_clusters) or ()
    if clusters:
        fields["clusters"] = list(clusters)
    for name in ("nodelist", "exclude"):
        option = options.get(name)
        if option is not None and option.value:
            fields[name] = place_nodes(option, expand_hostlist(option.value), clusters, clusters_option)
    return fields


def sbatch_section(options: Options, cwd: str, environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """sbatch_section is the spec's ``sbatch:`` fields and the env that --export sends."""
    section: dict[str, Any] = {}
    chdir = options.value("chdir")
    if chdir:
        section["chdir"] = os.path.normpath(os.path.join(cwd, chdir))
    for name, key in (("output", "output"), ("error", "error"), ("mail-type", "mail_type"), ("mail-user", "mail_user")):
        if options.value(name):
            section[key] = options.value(name)
    mode = _open_mode(options)
    if mode:
        section["open_mode"] = mode
    for name, key in (("ntasks", "ntasks"), ("ntasks-per-node", "ntasks_per_node"), ("cpus-per-task", "cpus_per_task")):
        count = parsed(options.get(name), parse_count)
        if count is not None:
            section[key] = count
    if options.value("constraint"):
        section["constraint"] = options.value("constraint")
    section.update(placement_fields(options))
    if options.flag("exclusive"):
        section["exclusive"] = True
    env, export = export_env(options.value("export"), environ)
    if export:
        section["export"] = export
    return section, {**env, **gpu_env(options)}


# the GPU options sbatch hands on to the job (srun steps inside read them as their own defaults)
_GPU_VARIABLES = {"gpus": "SLURM_GPUS", "gpus-per-node": "SLURM_GPUS_PER_NODE", "gpus-per-task": "SLURM_GPUS_PER_TASK"}


def gpu_env(options: Options) -> dict[str, str]:
    """gpu_env is SLURM_GPUS, SLURM_GPUS_PER_NODE or SLURM_GPUS_PER_TASK as sbatch sets them from the options."""
    return {variable: options.value(name) or "" for name, variable in _GPU_VARIABLES.items() if options.value(name)}


def retry_fields(options: Options) -> dict[str, Any]:
    """retry_fields maps ``--no-requeue`` onto one attempt; ``--requeue`` is metasched's default retry."""
    return {"retry": {"max_attempts": 1}} if options.flag("no-requeue") else {}

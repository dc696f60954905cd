"""options reads sbatch options from the command line, ``#SBATCH`` directives and SBATCH_* variables.

It knows option *syntax* only (what values mean is ``cli.sbatch.values`` and
``cli.sbatch.translate``). The grammar follows sbatch, which uses ``getopt_long``:

- long options as ``--name=value`` or ``--name value``; an unambiguous prefix of a long option
  (``--part=gpu``) is accepted, as getopt_long does;
- short options as ``-J name``, ``-Jname``, and clustered flags (``-Q``);
- option parsing stops at the first non-option word (the script) or at ``--``: the words after
  the script are the script's own arguments;
- a directive is a line starting with ``#SBATCH`` in the leading comment block of the script:
  scanning stops at the first line that is neither blank nor a comment, as sbatch does. Its
  words are split like a shell would, and an unquoted ``#`` starts a comment (sbatch too).

Precedence is sbatch's: command line over SBATCH_* environment over directives; within one
source a later occurrence wins. The memory options (``--mem``, ``--mem-per-cpu``,
``--mem-per-gpu``) and the GPU options (``--gres``, ``--gpus``, ``--gpus-per-node``) are each
one *group*: two members in the same source are an error, and a higher-precedence source that
sets one member replaces the whole group (``--mem`` on the command line overrides
``#SBATCH --mem-per-cpu``), which is how Slurm treats the memory options.

An option that msbatch does not support is an error that names it and where it came from;
nothing is silently dropped.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NoReturn, TypeVar


class SbatchError(ValueError):
    """SbatchError is a usage problem with a submission; each problem is one line for the user."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


class Where(StrEnum):
    """Where tells in which sources an option may appear."""

    ANYWHERE = "anywhere"
    COMMAND_LINE = "command line only"


@dataclass(frozen=True, slots=True)
class OptionDef:
    """OptionDef is one option msbatch supports: its long name, short letter and arity."""

    name: str
    short: str | None = None
    takes_value: bool = True
    where: Where = Where.ANYWHERE
    help: str = ""


# The options msbatch understands. The last block is msbatch's own (not sbatch's).
SUPPORTED: dict[str, OptionDef] = {
    d.name: d
    for d in (
        OptionDef("job-name", "J", help="job name (default: the script's file name)"),
        OptionDef("account", "A", help="tenant the job is charged to (required)"),
        OptionDef("partition", "p", help="Slurm partition (one)"),
        OptionDef("qos", "q", help="quality of service"),
        OptionDef("nodes", "N", help="node count (= training workers)"),
        OptionDef("ntasks", "n", help="total tasks; must be consistent with --nodes"),
        OptionDef("ntasks-per-node", help="tasks per node"),
        OptionDef("cpus-per-task", "c", help="CPUs per task"),
        OptionDef("mem", help="memory per node (MB unless suffixed K/M/G/T)"),
        OptionDef("mem-per-cpu", help="memory per CPU"),
        OptionDef("mem-per-gpu", help="memory per GPU"),
        OptionDef("gres", help="generic resources: only gpu[:type][:count]"),
        OptionDef("gpus", "G", help="total GPUs [type:]count, divided evenly over the nodes"),
        OptionDef("gpus-per-node", help="GPUs per node [type:]count"),
        OptionDef("time", "t", help="time limit (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S)"),
        OptionDef("comment", help="free text, recorded as MSBATCH_COMMENT"),
        OptionDef("signal", help="[{R|B}:]SIG[@secs], recorded as MSBATCH_SIGNAL(_GRACE_S)"),
        OptionDef("array", "a", help="index list 0-15, 1,3,5, 0-15:2, with %N max in parallel"),
        OptionDef("output", "o", help="stdout file pattern (%j %x %u %A %a %N %%), as sbatch"),
        OptionDef("error", "e", help="stderr file pattern, as sbatch"),
        OptionDef("open-mode", help="append | truncate: how -o/-e files are opened"),
        OptionDef("chdir", "D", help="the job's working folder (default: where msbatch runs)"),
        OptionDef("export", help="ALL (default), NONE, or [ALL,]NAME[=value],... passed to the job"),
        OptionDef("exclusive", takes_value=False, help="whole nodes, shared with no other job"),
        OptionDef("constraint", "C", help="node features: a&b, a|b (no counts or brackets)"),
        OptionDef("nodelist", "w", help="run on exactly these nodes (a hostlist; -N defaults to their count)"),
        OptionDef("exclude", "x", help="never run on these nodes (a hostlist)"),
        OptionDef("clusters", "M", help="only these Slurm clusters: a,b or all (-w/-x: cluster/node)"),
        OptionDef("requeue", takes_value=False, help="retry after node failure or preemption (the default)"),
        OptionDef("no-requeue", takes_value=False, help="never retry: one attempt only"),
        OptionDef("mail-type", help="NONE, BEGIN, END, FAIL, ALL, ... passed to Slurm"),
        OptionDef("mail-user", help="who gets the mail, passed to Slurm"),
        OptionDef("gpus-per-task", help="[type:]count GPUs per task (GPUs per node = tasks x count)"),
        OptionDef("dependency", "d", help="after|afterany|afterok|afternotok:JOB[+min][:JOB...], singleton; , = all, ? = any"),
        OptionDef("kill-on-invalid-dep", help="yes | no: cancel the job when its dependency can never be satisfied"),
        OptionDef("hold", "H", takes_value=False, help="submit held (JobHeldUser); `metasched release JOB` frees it"),
        OptionDef("begin", "b", help="not before: now+1hour, 16:00, tomorrow, 2026-12-24T10:00, ..."),
        OptionDef("wrap", help="run this command instead of a script"),
        OptionDef("parsable", takes_value=False, help="print only the job id"),
        OptionDef("quiet", "Q", takes_value=False, help="no notes on stderr"),
        OptionDef("test-only", takes_value=False, help="validate and print the spec; submit nothing"),
        OptionDef("help", "h", takes_value=False, where=Where.COMMAND_LINE, help="show this help"),
        OptionDef("usage", "u", takes_value=False, where=Where.COMMAND_LINE, help="show this help"),
        OptionDef("version", "V", takes_value=False, where=Where.COMMAND_LINE, help="show the version"),
        # msbatch's own options
        OptionDef("kind", help="training | inference | evaluation (msbatch only)"),
        OptionDef("key", where=Where.COMMAND_LINE, help="idempotency key (msbatch only)"),
        OptionDef("db", where=Where.COMMAND_LINE, help="metasched store URL: local mode, root only (msbatch only)"),
        OptionDef("api", where=Where.COMMAND_LINE, help="metasched API address (msbatch only; default $METASCHED_API)"),
    )
}

# sbatch's other options (Slurm 22.05 man page), so that an abbreviation or a short letter is
# refused under its real name instead of as a mystery.
_SBATCH_UNSUPPORTED_LONG = (
    "acctg-freq batch bb bbf cluster-constraint container "
    "contiguous core-spec cores-per-socket cpu-freq cpus-per-gpu deadline delay-boot "
    "distribution export-file extra-node-info get-user-env gid gpu-bind "
    "gpu-freq gpus-per-socket gres-flags hint ignore-pbs input "
    "licenses mcs-label mem-bind mincpus network nice "
    "no-kill nodefile ntasks-per-core ntasks-per-gpu ntasks-per-socket "
    "overcommit oversubscribe power prefer priority profile propagate reboot "
    "reservation sockets-per-node spread-job switches thread-spec threads-per-core time-min tmp "
    "tres-per-task uid use-min-nodes verbose wait wait-all-nodes wckey"
).split()
_SBATCH_UNSUPPORTED_SHORT = {
    "B": "extra-node-info", "F": "nodefile", "i": "input", "k": "no-kill", "L": "licenses", "m": "distribution",
    "O": "overcommit", "s": "oversubscribe", "S": "core-spec", "v": "verbose",
    "W": "wait",
}  # fmt: skip
# sbatch's other spellings of a supported option (getopt_long takes them whole, like any name)
ALIASES = {"cluster": "clusters"}
_SHORT = {d.short: d.name for d in SUPPORTED.values() if d.short}
_ALL_LONG = sorted(set(SUPPORTED) | set(ALIASES) | set(_SBATCH_UNSUPPORTED_LONG))

# The SBATCH_* input variables msbatch honours (the trivial, string-valued ones).
ENVIRONMENT = {
    "SBATCH_ACCOUNT": "account",
    "SBATCH_JOB_NAME": "job-name",
    "SBATCH_PARTITION": "partition",
    "SBATCH_QOS": "qos",
    "SBATCH_TIMELIMIT": "time",
    "SBATCH_EXPORT": "export",
    "SBATCH_CONSTRAINT": "constraint",
    "SBATCH_OPEN_MODE": "open-mode",
    # both are sbatch's; SLURM_CLUSTERS comes later in its table, so it wins when both are set
    "SBATCH_CLUSTERS": "clusters",
    "SLURM_CLUSTERS": "clusters",
}

# Each group is set by one source only; see the module docstring.
GROUPS = (
    ("mem", "mem-per-cpu", "mem-per-gpu"),
    ("gres", "gpus", "gpus-per-node", "gpus-per-task"),
    ("requeue", "no-requeue"),
)

# Why some sbatch options stay refused (docs/sbatch.md's options table says the same).
REFUSED_BECAUSE = {
    "ntasks-per-gpu": "metasched's resource model counts GPUs per node; use --gpus-per-task or --gres",
    "export-file": "the job's environment is sent with the job; use --export=NAME=value",
}


class Source(StrEnum):
    """Source is where an option came from, in increasing precedence."""

    DIRECTIVE = "directive"
    ENVIRONMENT = "environment"
    COMMAND_LINE = "command line"


@dataclass(frozen=True, slots=True)
class Origin:
    """Origin locates an option for error messages: a directive line, a variable or the command line."""

    source: Source
    line: int | None = None
    variable: str | None = None

    def describe(self) -> str:
        """describe renders the origin as it is appended to messages, e.g. ``in #SBATCH line 4``."""
        if self.source is Source.DIRECTIVE:
            return f"in #SBATCH line {self.line}"
        if self.source is Source.ENVIRONMENT:
            return f"from ${self.variable}"
        return "on the command line"


@dataclass(frozen=True, slots=True)
class OptionValue:
    """OptionValue is one occurrence of an option: canonical name, value (None for a flag), origin."""

    name: str
    value: str | None
    origin: Origin

    def label(self) -> str:
        """label renders the option as the user wrote it in canonical form, e.g. ``--time=4:00:00``."""
        return f"--{self.name}" if self.value is None else f"--{self.name}={self.value}"

    def where(self) -> str:
        """where is ``--name=value (in #SBATCH line 4)``, the prefix of a value error."""
        return f"{self.label()} ({self.origin.describe()})"


@dataclass(frozen=True, slots=True)
class CommandLine:
    """CommandLine is msbatch's argv split into options, the script path and the script's arguments."""

    options: tuple[OptionValue, ...]
    script: str | None
    args: tuple[str, ...]


@dataclass(frozen=True)
class Options:
    """Options is the merged result: for each option name the occurrence that wins."""

    values: Mapping[str, OptionValue] = field(default_factory=dict)

    def get(self, name: str) -> OptionValue | None:
        """get returns the winning occurrence of ``name`` or None."""
        return self.values.get(name)

    def value(self, name: str) -> str | None:
        """value returns the winning value of ``name`` or None."""
        found = self.values.get(name)
        return found.value if found else None

    def flag(self, name: str) -> bool:
        """flag tells whether the option ``name`` was given."""
        return name in self.values


# --- resolving names ------------------------------------------------------------------------


def _unsupported(name: str, origin: Origin) -> SbatchError:
    known = name in _SBATCH_UNSUPPORTED_LONG
    what = "unsupported sbatch option" if known else "unknown option"
    because = f": {REFUSED_BECAUSE[name]}" if name in REFUSED_BECAUSE else ""
    return SbatchError([f"{what} --{name} ({origin.describe()}){because}"])


def _resolve_long(name: str, origin: Origin) -> OptionDef:
    """_resolve_long maps a long name or an unambiguous prefix to its definition, as getopt_long."""
    if name in SUPPORTED:
        return SUPPORTED[name]
    if name in ALIASES:
        return SUPPORTED[ALIASES[name]]
    if name in _SBATCH_UNSUPPORTED_LONG:
        # an exact name wins even when it is also a prefix of others (--export, --export-file),
        # as in getopt_long: refused by its name, not called ambiguous
        raise _unsupported(name, origin)
    candidates = [known for known in _ALL_LONG if known.startswith(name)] if name else []
    if len(candidates) > 1:
        choices = ", ".join(f"--{c}" for c in candidates)
        raise SbatchError([f"ambiguous option --{name} ({origin.describe()}): could be {choices}"])
    full = ALIASES.get(candidates[0], candidates[0]) if candidates else name
    if full in SUPPORTED:
        return SUPPORTED[full]
    raise _unsupported(full, origin)


def _resolve_short(letter: str, origin: Origin) -> OptionDef:
    """_resolve_short maps a short letter to its definition or refuses it by its long name."""
    if letter in _SHORT:
        return SUPPORTED[_SHORT[letter]]
    if letter in _SBATCH_UNSUPPORTED_SHORT:
        name = _SBATCH_UNSUPPORTED_SHORT[letter]
        return _raise(f"unsupported sbatch option -{letter}/--{name} ({origin.describe()})")
    return _raise(f"unknown option -{letter} ({origin.describe()})")


def _raise(problem: str) -> NoReturn:
    raise SbatchError([problem])


def _check_where(definition: OptionDef, origin: Origin) -> None:
    if definition.where is Where.COMMAND_LINE and origin.source is not Source.COMMAND_LINE:
        raise SbatchError([f"--{definition.name} is only accepted on the command line ({origin.describe()})"])


# --- parsing words --------------------------------------------------------------------------


def _take_value(definition: OptionDef, words: list[str], origin: Origin) -> str:
    if not words:
        raise SbatchError([f"option --{definition.name} needs a value ({origin.describe()})"])
    return words.pop(0)


def _parse_long(word: str, words: list[str], origin: Origin) -> OptionValue:
    name, has_value, inline = word[2:].partition("=")
    definition = _resolve_long(name, origin)
    _check_where(definition, origin)
    if not definition.takes_value:
        if has_value:
            raise SbatchError([f"option --{definition.name} takes no value ({origin.describe()})"])
        return OptionValue(definition.name, None, origin)
    value = inline if has_value else _take_value(definition, words, origin)
    return OptionValue(definition.name, value, origin)


def _parse_short(word: str, words: list[str], origin: Origin) -> list[OptionValue]:
    found: list[OptionValue] = []
    rest = word[1:]
    while rest:
        definition = _resolve_short(rest[0], origin)
        _check_where(definition, origin)
        rest = rest[1:]
        if not definition.takes_value:
            found.append(OptionValue(definition.name, None, origin))
            continue
        value = rest if rest else _take_value(definition, words, origin)
        found.append(OptionValue(definition.name, value, origin))
        break
    return found


def parse_words(words: Iterable[str], origin: Origin) -> tuple[list[OptionValue], list[str]]:
    """parse_words reads options until the first non-option word; it returns them and the rest."""
    pending = list(words)
    found: list[OptionValue] = []
    while pending:
        word = pending[0]
        if word == "--":
            return found, pending[1:]
        if not word.startswith("-") or word == "-":
            break
        pending.pop(0)
        if word.startswith("--"):
            found.append(_parse_long(word, pending, origin))
        else:
            found.extend(_parse_short(word, pending, origin))
    return found, pending


def parse_command_line(argv: Iterable[str]) -> CommandLine:
    """parse_command_line splits msbatch's argv into options, the script path and its arguments."""
    options, rest = parse_words(argv, Origin(Source.COMMAND_LINE))
    script = rest[0] if rest else None
    return CommandLine(tuple(options), script, tuple(rest[1:]))


# --- directives -----------------------------------------------------------------------------


def script_lines(text: str) -> list[str]:
    """script_lines splits a script at ``\n`` only, as sbatch and bash do.

    ``str.splitlines`` also breaks at ``\r``, form feeds, ``\x1c``-``\x1e``, ``\x85`` and
    U+2028/U+2029, which would read a ``#SBATCH`` directive that sbatch and bash see as the rest of
    a comment line.
    """
    return text.split("\n")


def directive_block_end(lines: list[str]) -> int:
    """directive_block_end is the index of the first line that ends the leading comment block."""
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return index
    return len(lines)


def _directive_words(line: str) -> list[str] | None:
    """_directive_words returns a ``#SBATCH`` line's words, or None when the line is not one."""
    if not line.startswith("#SBATCH"):
        return None
    rest = line[len("#SBATCH") :]
    if rest and not rest[0].isspace():
        return None  # "#SBATCHED" is an ordinary comment
    return shlex.split(rest, comments=True)


def _directive_line(line: str, origin: Origin) -> list[OptionValue]:
    try:
        words = _directive_words(line)
    except ValueError as exc:
        raise SbatchError([f"cannot split #SBATCH line {origin.line}: {exc}"]) from None
    if not words:
        return []
    options, rest = parse_words(words, origin)
    if rest:
        raise SbatchError([f"unexpected word {rest[0]!r} in #SBATCH line {origin.line} (not an option)"])
    return options


def read_directives(script_text: str) -> list[OptionValue]:
    """read_directives parses the ``#SBATCH`` lines of the leading comment block; problems are collected."""
    lines = script_lines(script_text)
    found: list[OptionValue] = []
    problems: list[str] = []
    for index, line in enumerate(lines[: directive_block_end(lines)]):
        try:
            found.extend(_directive_line(line, Origin(Source.DIRECTIVE, line=index + 1)))
        except SbatchError as exc:
            problems.extend(exc.problems)  # report every bad line at once, not one per run
    if problems:
        raise SbatchError(problems)
    return found


def read_environment(environ: Mapping[str, str]) -> list[OptionValue]:
    """read_environment turns the supported SBATCH_* variables into options (empty ones are unset)."""
    return [
        OptionValue(name, environ[variable], Origin(Source.ENVIRONMENT, variable=variable))
        for variable, name in ENVIRONMENT.items()
        if environ.get(variable)
    ]


# --- precedence -----------------------------------------------------------------------------


def _group_of(name: str) -> tuple[str, ...] | None:
    return next((group for group in GROUPS if name in group), None)


def _check_groups(options: list[OptionValue]) -> None:
    """_check_groups refuses two members of one group given by the same source."""
    problems = []
    for group in GROUPS:
        present = {o.name: o for o in options if o.name in group}
        if len(present) > 1:
            places = "; ".join(o.where() for o in present.values())
            names = " and ".join(f"--{n}" for n in present)
            problems.append(f"{names} are mutually exclusive ({places})")
    if problems:
        raise SbatchError(problems)


def merge(*sources: list[OptionValue]) -> Options:
    """merge applies sources in increasing precedence; a group is replaced as a whole."""
    merged: dict[str, OptionValue] = {}
    for options in sources:
        _check_groups(options)
        for group in {_group_of(o.name) for o in options} - {None}:
            for name in group or ():
                merged.pop(name, None)
        for option in options:
            merged[option.name] = option
    return Options(merged)


T = TypeVar("T")


def parsed(option: OptionValue | None, parser: Callable[[str], T]) -> T | None:
    """parsed applies ``parser`` to an option's value; a bad value is an error naming the option."""
    if option is None:
        return None
    try:
        return parser(option.value or "")
    except ValueError as exc:
        raise SbatchError([f"invalid {option.where()}: {exc}"]) from None

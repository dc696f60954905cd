"""LaunchRequest: everything needed to render one attempt's sbatch script, validated up front."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from meta.model.ids import check_site_id
from meta.model.kinds import JobKind
from meta.model.resources import ZERO, ResourceVector
from slurm_bridge.tags import check_attempt_id

# Values that go into "#SBATCH --opt=value" lines unquoted: sbatch splits directives on
# whitespace and handles quotes its own way, so only plain tokens are allowed there.
# Checked with fullmatch: a bare "$" would also accept a value ending in a newline.
_SLURM_TOKEN = re.compile(r"[A-Za-z0-9._:/@%+=,\[\]-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ROLE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_SECRET = re.compile(r"[A-Za-z0-9_-]{16,256}")  # secrets.token_urlsafe's alphabet
# the sbatch options a user's job may add (meta/model/sbatch_fields.py checked their values at submit)
_USER_OPTION = re.compile(
    r"--(?:open-mode=(?:append|truncate)|mail-type=[A-Z0-9_,]+|mail-user=[A-Za-z0-9._:/@%+=,-]+|export=NONE"
    r"|exclusive|constraint=[A-Za-z0-9_.&|,-]+)"
)
_LAYOUT = re.compile(r"--(?:ntasks|ntasks-per-node|cpus-per-task)=[0-9]{1,7}")


class LaunchRequestError(ValueError):
    """LaunchRequestError is raised for a request that cannot be rendered safely."""


def is_token(value: str) -> bool:
    """is_token tells whether ``value`` may appear unquoted in an ``#SBATCH`` line."""
    return _SLURM_TOKEN.fullmatch(value) is not None


def check_token(what: str, value: str | None) -> None:
    """check_token rejects values that are unsafe in an ``#SBATCH`` line (spaces, quotes, newlines)."""
    if value is not None and not is_token(value):
        raise LaunchRequestError(f"{what} {value!r} must match {_SLURM_TOKEN.pattern}")


@dataclass(frozen=True, slots=True)
class RunAs:
    """RunAs is the user a job runs as: ``sbatch --uid --gid`` (root only) and its working folder ``--chdir``."""

    uid: int
    gid: int
    chdir: str | None = None

    def __post_init__(self) -> None:
        if self.uid < 0 or self.gid < 0:
            raise LaunchRequestError(f"uid {self.uid} and gid {self.gid} must not be negative")
        if self.chdir is not None and (not self.chdir.startswith("/") or "\x00" in self.chdir):
            raise LaunchRequestError(f"the working folder {self.chdir!r} must be an absolute path without NUL")

    def sbatch_args(self) -> list[str]:
        """sbatch_args are sbatch's options for this user (argv items: a folder may hold spaces)."""
        args = [f"--uid={self.uid}", f"--gid={self.gid}"]
        return args + ([f"--chdir={self.chdir}"] if self.chdir else [])


@dataclass(frozen=True, slots=True)
class Role:
    """Role is one het-job component with its own shape, nodes, partition and command."""

    name: str
    per_node: ResourceVector
    command: str
    num_nodes: int = 1
    nodes: tuple[str, ...] = ()
    ntasks_per_node: int = 1
    partition: str | None = None

    def __post_init__(self) -> None:
        if not _ROLE_NAME.fullmatch(self.name):
            raise LaunchRequestError(f"role name {self.name!r} must match {_ROLE_NAME.pattern}")
        _check_shape(self.num_nodes, self.nodes, self.ntasks_per_node)
        check_token("partition", self.partition)


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    """LaunchRequest is one attempt of one task, as the actuator hands it to the renderer."""

    attempt_id: str
    attempt_number: int
    fencing_token: int
    job_id: str
    task_id: str
    tenant: str
    kind: JobKind
    time_limit_s: int
    # the metasched site the attempt belongs to (its store's id): the tag names it, so another
    # site sharing the cluster leaves the job alone
    site: str
    command: str | None = None
    script: str | None = None
    per_node: ResourceVector = ZERO
    num_nodes: int = 1
    nodes: tuple[str, ...] = ()
    ntasks_per_node: int = 1
    qos: str | None = None
    partition: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    secret_names: tuple[str, ...] = ()
    job_name: str = ""
    # the Slurm job name: the user's job name (sbatch -J); empty: the legacy ms-<attempt>
    slurm_name: str = ""
    task_name: str = ""  # the task's name: an inference partition's shard name or index
    # where the job's `metasched commit/checkpoint report` reach the service (METASCHED_API)
    api_address: str | None = None
    # the attempt's random secret, proof of the job-side calls: only in the script's exports
    # (shown by Slurm to the owner and admins only), never in a job name, comment or option
    attempt_secret: str | None = None
    checkpoint_dir: str | None = None
    output_dir: str | None = None
    resume_from: str | None = None
    # the job declared a checkpoint: only then is it sent the checkpoint signal before its time
    # limit (a program that does not trap the signal is killed by it)
    checkpoints: bool = False
    grace_s: int = 120
    roles: tuple[Role, ...] = ()
    reservation: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    # no --output at all: sbatch's default, slurm-%j.out in the job's working folder (a job that
    # runs as its user, in its submit folder)
    sbatch_default_output: bool = False
    # an sbatch job's own options (open mode, mail, export, exclusive, constraint), each one
    # "--name[=value]" of an allow-list
    user_options: tuple[str, ...] = ()
    # an sbatch job's task layout as the user wrote it (--ntasks, --ntasks-per-node,
    # --cpus-per-task; empty: Slurm's defaults); None: metasched's (one task per worker)
    layout: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # A private copy: the caller's dict changing later must not change a validated request
        # (a plain dict, so that asdict/pickle/deepcopy keep working).
        object.__setattr__(self, "env", dict(self.env))
        try:
            check_attempt_id(self.attempt_id)
            check_site_id(self.site)
        except ValueError as error:
            raise LaunchRequestError(str(error)) from error
        check_token("slurm_name", self.slurm_name or None)
        for what in ("tenant", "qos", "partition", "reservation", "stdout", "stderr"):
            check_token(what, getattr(self, what))
        _check_shape(self.num_nodes, self.nodes, self.ntasks_per_node)
        self._check_entrypoint()
        self._check_env()
        for option, pattern in [(o, _USER_OPTION) for o in self.user_options] + [(o, _LAYOUT) for o in self.layout or ()]:
            if not pattern.fullmatch(option):
                raise LaunchRequestError(f"sbatch option {option!r} is not one a job may add")
        if self.attempt_secret is not None and not _SECRET.fullmatch(self.attempt_secret):
            raise LaunchRequestError("an attempt secret is 16 to 256 URL-safe characters")
        if self.time_limit_s <= 0 or self.grace_s < 0:
            raise LaunchRequestError("time_limit_s must be positive and grace_s not negative")
        if self.checkpoints and self.kind != JobKind.TRAINING:
            raise LaunchRequestError(f"only training jobs checkpoint, not {self.kind.value} jobs")

    def _check_entrypoint(self) -> None:
        """_check_entrypoint: exactly one of command/script, or roles that carry their own commands."""
        if self.roles:
            if self.command or self.script or len(self.roles) < 2:
                raise LaunchRequestError("a het-job has two or more roles, each with its own command")
        elif bool(self.command) == bool(self.script):
            raise LaunchRequestError("give exactly one of command or script")

    def _check_env(self) -> None:
        """_check_env rejects unsafe or reserved variable names; values are quoted when rendered."""
        names = list(self.env) + list(self.secret_names)
        bad = [name for name in names if not _ENV_NAME.fullmatch(name) or name.startswith("METASCHED_")]
        if bad:
            raise LaunchRequestError(f"invalid or reserved environment variable name(s): {sorted(bad)}")
        clash = set(self.env) & set(self.secret_names)
        if clash:
            raise LaunchRequestError(f"secret(s) also given as plain environment: {sorted(clash)}")


def _check_shape(num_nodes: int, nodes: tuple[str, ...], ntasks_per_node: int) -> None:
    """_check_shape checks node counts and that a nodelist, when given, names every node."""
    if num_nodes < 1 or ntasks_per_node < 1:
        raise LaunchRequestError("num_nodes and ntasks_per_node must be at least 1")
    if nodes and len(set(nodes)) != num_nodes:
        raise LaunchRequestError(f"nodes {list(nodes)} do not match num_nodes={num_nodes}")
    for node in nodes:
        check_token("node", node)

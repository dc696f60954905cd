"""SbatchFields: what an sbatch user asked for that only Slurm acts on (working folder, logs, mail, export, placement).

A job file's ``sbatch:`` section (msbatch fills it from ``#SBATCH`` lines and the command line).
Everything here is either handed to Slurm in the attempt's ``#SBATCH`` lines (so it must be a
plain token: no spaces, quotes or newlines) or read by the policy as a hard placement filter
(``constraint``, ``nodelist``, ``exclude``, ``exclusive``, ``clusters``). Values are checked here, once, at
submit: a rendered script never meets a value it cannot pass on.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, field_validator

from meta.model.clusters import check_cluster_name, split_qualified
from meta.model.limits import MAX_PATH_BYTES, is_slurm_name, printable

# the same alphabet slurm_bridge.launch accepts unquoted in an #SBATCH line
_TOKEN = re.compile(r"[A-Za-z0-9._:/@%+=,\[\]-]+")
# sbatch --mail-type values (Slurm 22.05 man page)
MAIL_TYPES = frozenset({
    "NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT", "TIME_LIMIT",
    "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS",
})  # fmt: skip
_FEATURE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_NODE_NAMES = 1024


def _token(value: str) -> str:
    """_token refuses what cannot be written unquoted in an ``#SBATCH`` line."""
    if not _TOKEN.fullmatch(value) or len(value.encode()) > MAX_PATH_BYTES:
        raise ValueError(
            f"'{printable(value)[:80]}' must be a plain path or word (letters, digits and ._:/@%+=,-; no spaces)"
        )
    return value


def _absolute(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"'{printable(value)[:80]}' must be an absolute path")
    return value


def _mail_types(value: str) -> str:
    unknown = [item for item in value.split(",") if item.upper() not in MAIL_TYPES]
    if unknown:
        raise ValueError(f"unknown mail type(s) {', '.join(printable(u) for u in unknown[:5])} "
                         f"(one of {', '.join(sorted(MAIL_TYPES))})")  # fmt: skip
    return value.upper()


def parse_constraint(text: str) -> tuple[frozenset[str], ...]:
    """parse_constraint reads ``a&b``, ``a|b`` or ``a,b`` (AND) into alternatives, each a set of features all required.

    ``&`` (and its synonym ``,``) binds tighter than ``|``, as in Slurm. Counts (``a*2``),
    brackets and ``!`` are refused: they constrain how many nodes have a feature, which the
    policy does not model.
    """
    alternatives = []
    for alternative in text.split("|"):
        features = frozenset(alternative.replace(",", "&").split("&"))
        bad = [f for f in features if not _FEATURE.fullmatch(f)]
        if bad:
            raise ValueError(
                f"constraint '{printable(text)[:80]}': only feature names joined by & , and | are supported "
                "(no counts, brackets or !)"
            )
        alternatives.append(features)
    return tuple(alternatives)


def _constraint(value: str) -> str:
    parse_constraint(value)
    return value


def _is_node_name(name: str) -> bool:
    """_is_node_name: a Slurm node name, or ``cluster/node`` on a site of several clusters."""
    cluster, bare = split_qualified(name)
    if cluster:
        try:
            check_cluster_name(cluster)
        except ValueError:
            return False
    return is_slurm_name(bare)


def _node_names(value: tuple[str, ...]) -> tuple[str, ...]:
    bad = [name for name in value if not _is_node_name(name)]
    if bad:
        raise ValueError(f"'{printable(bad[0])[:80]}' is not a node name")
    return tuple(sorted(set(value)))


def _cluster_names(value: tuple[str, ...]) -> tuple[str, ...]:
    for name in value:
        check_cluster_name(name)
    return tuple(sorted(set(value)))


Token = Annotated[str, AfterValidator(_token)]
ClusterName = Annotated[str, AfterValidator(check_cluster_name)]
NodeNames = Annotated[tuple[str, ...], Field(max_length=MAX_NODE_NAMES), AfterValidator(_node_names)]
MAX_CLUSTERS = 64
ClusterNames = Annotated[tuple[str, ...], Field(max_length=MAX_CLUSTERS), AfterValidator(_cluster_names)]


class SbatchFields(BaseModel):
    """SbatchFields is a job's sbatch-only settings; every field is optional and None means sbatch's default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --chdir: the job's working folder (default: the submit folder)
    chdir: Annotated[str, AfterValidator(_token), AfterValidator(_absolute)] | None = None
    # -o/-e: sbatch filename patterns, relative to the working folder; Slurm expands them per attempt
    output: Token | None = None
    error: Token | None = None
    open_mode: Literal["append", "truncate"] | None = None
    mail_type: Annotated[str, AfterValidator(_token), AfterValidator(_mail_types)] | None = None
    mail_user: Token | None = None
    # --export other than ALL: what sbatch passes on (NONE, or a list without ALL); the values
    # the list names are in the job's env, resolved at submit
    export: Token | None = None
    # tasks per worker (node) and CPUs per task, as sbatch lays them out (srun starts this many)
    ntasks: Annotated[int, Strict(), Field(ge=1, le=1_000_000)] | None = None
    ntasks_per_node: Annotated[int, Strict(), Field(ge=1, le=4096)] | None = None
    cpus_per_task: Annotated[int, Strict(), Field(ge=1, le=4096)] | None = None
    # placement: hard filters (constraint on node features, nodes required / excluded, whole nodes)
    constraint: Annotated[str, Field(max_length=1024), AfterValidator(_constraint)] | None = None
    nodelist: NodeNames = ()
    exclude: NodeNames = ()
    exclusive: bool = False
    # -M/--clusters: the Slurm clusters the job may run on (empty: any the site has)
    clusters: ClusterNames = ()

    @field_validator("mail_user")
    @classmethod
    def _mail_user(cls, value: str | None) -> str | None:
        if value is not None and "@" not in value and not is_slurm_name(value):
            raise ValueError("mail_user is an address or a user name")
        return value

    def features(self) -> tuple[frozenset[str], ...]:
        """features is the constraint's alternatives (empty: no constraint)."""
        return parse_constraint(self.constraint) if self.constraint else ()


def placement_filters(fields: SbatchFields | None) -> dict[str, Any]:
    """placement_filters are a waiting task's hard placement fields (PendingTask's) for an sbatch job; {} otherwise.

    An sbatch job's ``-N`` counts nodes, so its workers never share one.
    """
    if fields is None:
        return {}
    return {
        "constraint": fields.features(),
        "nodelist": frozenset(fields.nodelist),
        "exclude": frozenset(fields.exclude),
        "exclusive": fields.exclusive,
        "clusters": frozenset(fields.clusters),
        "one_per_node": True,
    }

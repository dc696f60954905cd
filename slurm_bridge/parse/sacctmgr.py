"""Parsing ``sacctmgr -n -P show ...`` output: one record per line, fields split by ``|``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from meta.model.limits import is_slurm_name
from slurm_bridge.errors import SlurmParseError


def parse_qos_names(text: str) -> list[str]:
    """parse_qos_names reads ``sacctmgr -n -P show qos format=Name``: one QOS name per line."""
    names = [line.strip() for line in text.splitlines() if line.strip()]
    odd = [name for name in names if not is_slurm_name(name)]
    if odd:
        raise SlurmParseError(f"sacctmgr show qos: not a QOS name: {odd[0][:80]!r}")
    return names


MAX_REGISTERED_CLUSTERS = 64  # clusters one slurmdbd serves: more is not a site metasched schedules


def registered_clusters_args() -> list[str]:
    """registered_clusters_args asks slurmdbd for its clusters and where each one's slurmctld registered from."""
    return ["-n", "-P", "show", "clusters", "format=Cluster,ControlHost,ControlPort"]


def parse_registered_clusters(text: str) -> list[str]:
    """parse_registered_clusters reads ``registered_clusters_args`` output: the clusters whose slurmctld registered.

    A cluster slurmdbd knows but whose controller never registered (no ControlHost, or port 0)
    cannot be reached with ``-M`` and is left out.
    """
    names: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) < 3 or not is_slurm_name(fields[0]):
            raise SlurmParseError(f"sacctmgr show clusters: not a cluster line: {line[:80]!r}")
        if fields[1].strip() and fields[2].strip() not in ("", "0"):
            names.append(fields[0])
    if len(names) > MAX_REGISTERED_CLUSTERS:
        raise SlurmParseError(f"sacctmgr show clusters: {len(names)} clusters, at most {MAX_REGISTERED_CLUSTERS} read")
    return names


# The fields of the two association reads, in the order the parsers expect them.
USER_FIELDS = ("User", "DefaultAccount", "AdminLevel", "Coordinators", "Cluster", "Account", "QOS")
_USER_FIELDS_BEFORE_QOS = 6  # captures made before the associations' QOS were read (issue 21)
MAX_QOS_PER_ASSOCIATION = 256  # a site has a handful; more is not sacctmgr output we understand
ACCOUNT_FIELDS = (
    "Cluster", "Account", "User", "Fairshare", "GrpTRES", "ParentName", "GrpSubmitJobs", "MaxSubmitJobs",
)  # fmt: skip
_ACCOUNT_FIELDS_BEFORE_LIMITS = 6  # captures made before the submit limits were read (issue 16)
# a passwd name: no separators sacctmgr would split on (',', '=', '|', spaces), not an option
_USER_NAME = re.compile(r"[A-Za-z0-9_.$@][A-Za-z0-9_.$@-]{0,127}")
_ADMIN_LEVELS = {"none": "None", "operator": "Operator", "administrator": "Administrator"}


@dataclass(frozen=True)
class UserAssociations:
    """UserAssociations is one Slurm user: default account, admin level, coordinated and member accounts."""

    user: str
    default_account: str
    admin_level: str  # None | Operator | Administrator
    coordinates: frozenset[str]
    # (cluster, account) pairs: the user may submit to these accounts on that cluster
    associations: frozenset[tuple[str, str]]
    # (cluster, account, qos) triples: the QOS each association allows (sbatch --qos is checked against them)
    association_qos: frozenset[tuple[str, str, str]] = frozenset()

    def accounts(self, cluster: str | None = None) -> frozenset[str]:
        """accounts are the accounts the user has associations in (on ``cluster`` when given)."""
        return frozenset(a for c, a in self.associations if cluster is None or c == cluster)

    def qos(self, account: str, cluster: str | None = None) -> frozenset[str]:
        """qos is the QOS the user's association in ``account`` allows (on ``cluster`` when given)."""
        return frozenset(q for c, a, q in self.association_qos if a == account and (cluster is None or c == cluster))


@dataclass(frozen=True)
class AccountShares:
    """AccountShares is an account's own association: its Fairshare and its GPU limits from GrpTRES."""

    cluster: str
    account: str
    parent: str
    fairshare: int | None  # None: "parent" (the account shares its parent's) or unset
    gpu_limits: dict[str, int]  # gres/gpu:<type>=N -> {type: N}; gres/gpu=N -> {"*": N}
    grp_tres: str  # as sacctmgr prints it
    grp_submit_jobs: int | None = None  # the account's pending + running jobs, all users (None: no limit)
    max_submit_jobs: int | None = None  # each user's, as the account sets it (Slurm copies it to its users)
    # each user association's own MaxSubmitJobs (inherited ones included: sacctmgr shows them on the user)
    user_max_submit_jobs: dict[str, int] = field(default_factory=dict)


def user_associations_args(user: str | None = None) -> list[str]:
    """user_associations_args is the argv (after ``sacctmgr``) reading one user's or every user's associations."""
    if user is not None and not _USER_NAME.fullmatch(user):
        raise ValueError(f"not a user name sacctmgr can be asked about: {user[:80]!r}")
    who = [f"name={user}"] if user is not None else []  # name=: never read as a keyword or option
    return ["-n", "-P", "show", "user", *who, "withcoord", "withassoc", "format=" + ",".join(USER_FIELDS)]


def account_shares_args() -> list[str]:
    """account_shares_args is the argv (after ``sacctmgr``) reading every association's shares."""
    return ["-n", "-P", "show", "assoc", "format=" + ",".join(ACCOUNT_FIELDS)]


def parse_user_associations(text: str) -> list[UserAssociations]:
    """parse_user_associations reads ``show user withcoord withassoc``: one line per (user, association).

    A user without associations is one line with empty Cluster and Account. Coordinators and QOS
    are comma-separated lists (``research,tenant-a``; ``high,low,normal``): Coordinators is repeated
    on each of the user's lines, QOS is that association's. Lines of the older six-field read (no
    QOS) are accepted too: their associations allow no QOS.
    """
    users: dict[str, dict[str, Any]] = {}
    for fields in _user_rows(text):
        name, default, admin, coords, cluster, account = fields[:_USER_FIELDS_BEFORE_QOS]
        entry = users.setdefault(
            name,
            {"default": default, "admin": _admin_level(admin), "coords": set(), "assoc": set(), "qos": set()},
        )
        entry["coords"].update(a for a in coords.split(",") if a)
        if account:
            entry["assoc"].add((cluster, account))
            entry["qos"].update((cluster, account, q) for q in _qos_list(fields[_USER_FIELDS_BEFORE_QOS:]))
    return [
        UserAssociations(
            user=name,
            default_account=e["default"],
            admin_level=e["admin"],
            coordinates=frozenset(e["coords"]),
            associations=frozenset(e["assoc"]),
            association_qos=frozenset(e["qos"]),
        )
        for name, e in users.items()
    ]


def _user_rows(text: str) -> list[list[str]]:
    """_user_rows splits ``show user`` output of the current read or the older six-field one."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    # seven fields: the current read, or an older line ending in a separator; both read "no QOS" the same
    older = len(first.split("|")) <= _USER_FIELDS_BEFORE_QOS
    return _rows(text, _USER_FIELDS_BEFORE_QOS if older else len(USER_FIELDS), "show user")


def _qos_list(rest: list[str]) -> list[str]:
    """_qos_list reads an association's QOS field (``high,low,normal``): Slurm names, at most a bounded many."""
    text = rest[0] if rest else ""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if len(names) > MAX_QOS_PER_ASSOCIATION:
        raise SlurmParseError(f"sacctmgr show user: {len(names)} QOS in one association (at most {MAX_QOS_PER_ASSOCIATION})")
    odd = [name for name in names if not is_slurm_name(name)]
    if odd:
        raise SlurmParseError(f"sacctmgr show user: not a QOS name: {odd[0][:80]!r}")
    return names


def parse_account_shares(text: str) -> list[AccountShares]:
    """parse_account_shares reads ``show assoc``: each account's Fairshare, GrpTRES and submit limits.

    User rows give only their MaxSubmitJobs (their share inside the account is not the tenant's).
    Lines of the older six-field read (no submit limits) are accepted too.
    """
    shares = []
    users: dict[tuple[str, str], dict[str, int]] = {}
    for fields in _share_rows(text):
        cluster, account, user, fairshare, grp_tres, parent = fields[:_ACCOUNT_FIELDS_BEFORE_LIMITS]
        grp_submit, max_submit = (fields[6:] + ["", ""])[:2]
        if user:
            limit = _count(max_submit, "MaxSubmitJobs")
            if limit is not None:
                users.setdefault((cluster, account), {})[user] = limit
            continue
        shares.append(
            AccountShares(
                cluster=cluster,
                account=account,
                parent=parent,
                fairshare=_fairshare(fairshare),
                gpu_limits=gpu_limits(grp_tres),
                grp_tres=grp_tres,
                grp_submit_jobs=_count(grp_submit, "GrpSubmitJobs"),
                max_submit_jobs=_count(max_submit, "MaxSubmitJobs"),
            )
        )
    for share in shares:
        share.user_max_submit_jobs.update(users.get((share.cluster, share.account), {}))
    return shares


def _share_rows(text: str) -> list[list[str]]:
    """_share_rows splits ``show assoc`` output of the current read or the older six-field one."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    older = len(first.split("|")) <= _ACCOUNT_FIELDS_BEFORE_LIMITS + 1  # (+1: a trailing separator)
    width = _ACCOUNT_FIELDS_BEFORE_LIMITS if older else len(ACCOUNT_FIELDS)
    return _rows(text, width, "show assoc")


def _count(text: str, what: str) -> int | None:
    """_count reads a job-count limit: a number, or empty for none."""
    if text == "":
        return None
    if not text.isascii() or not text.isdigit():
        raise SlurmParseError(f"sacctmgr show assoc: bad {what} {text[:40]!r}")
    return int(text)


def gpu_limits(grp_tres: str) -> dict[str, int]:
    """gpu_limits reads the GPU part of a GrpTRES: ``gres/gpu:a100=32`` -> a100, ``gres/gpu=64`` -> ``*``."""
    limits: dict[str, int] = {}
    for item in grp_tres.split(","):
        name, sep, value = item.strip().partition("=")
        if not sep or not (name == "gres/gpu" or name.startswith("gres/gpu:")):
            continue  # cpu=, mem=, node=, other GRES: not metasched's to enforce
        if not value.isascii() or not value.isdigit():
            raise SlurmParseError(f"sacctmgr GrpTRES: bad count in {item.strip()[:80]!r}")
        gpu_type = name.partition(":")[2].lower() or "*"
        limits[gpu_type] = int(value)
    return limits


def _rows(text: str, width: int, what: str) -> list[list[str]]:
    """_rows splits ``-n -P`` output into lines of exactly ``width`` fields."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if fields and fields[-1] == "" and len(fields) == width + 1:
            fields.pop()  # some sacctmgr versions end -P lines with a separator
        if len(fields) != width:
            raise SlurmParseError(f"sacctmgr {what}: {len(fields)} fields, expected {width}: {line[:120]!r}")
        rows.append([f.strip() for f in fields])
    return rows


def _admin_level(text: str) -> str:
    level = _ADMIN_LEVELS.get(text.strip().lower())
    if level is None:
        raise SlurmParseError(f"sacctmgr show user: unknown AdminLevel {text[:40]!r}")
    return level


def _fairshare(text: str) -> int | None:
    """_fairshare reads a Fairshare: a number, or ``parent`` (None)."""
    if text == "" or text.lower() == "parent":
        return None
    if not text.isascii() or not text.isdigit():
        raise SlurmParseError(f"sacctmgr show assoc: bad Fairshare {text[:40]!r}")
    return int(text)

"""What-if scenarios (pure, no I/O): nodes added or removed by type, shares, demand, trend, policy file.

Rules (``metasched plan what-if`` prints the ones that apply):

* **Nodes added** (``h100:8x4``: 4 nodes of 8 h100 GPUs) copy the cpus, memory, leaf switch and
  partitions of the largest existing group of that GPU type (one with the same GPUs per node if
  any); a type the cluster does not have is refused: there is nothing to copy the shape from.
* **Nodes removed** (``a100:2``, or ``a100:8x2`` for nodes of 8 GPUs only) come one at a time from
  the largest remaining group of the type, so the switch layout thins out evenly; asking for more
  nodes than exist is refused. Removals apply to the nodes the site has, never to added ones.
* **Shares** (``tenant-a=50``) set a tenant's fair-share weight (as ``sacctmgr ... Fairshare=50``).
* **Demand** (``tenant-b=1.5``, ``*=1.2``) scales a tenant's rows: row ``i`` of the tenant (in
  eligible order) is replayed ``floor((i+1)·f) − floor(i·f)`` times, so ×1.5 copies every second
  row and ×0.5 drops every second row — deterministic, no randomness. A copy gets a fresh job id
  (``<id>~<n>``) and is submitted between its row and the tenant's next row (after the last row:
  within the tenant's mean gap, not past the window's end), so the arrival pattern keeps its shape. Factors multiply: ``*``, the
  tenant's own and the trend's.
* **Trend** (``--trend --horizon 90d``): a least-squares line through the rows eligible per whole
  day of the window; the factor is the line's rate ``horizon`` after the window's end over the
  window's mean rate, applied to every tenant as a demand factor.
* **Bounds**: at most 10,000 nodes per change and in the cluster, 64 GPUs per node, demand
  factors 0–10, weights in (0, 1,000,000], 64 changes per scenario, 16 scenarios.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from meta.model.durations import parse_duration_s
from meta.model.errors import InvalidRequest
from meta.plan.history import HistoryRow
from meta.sim.cluster import ClusterSpec, NodeGroup

MAX_NODES = 10_000  # per change and in the resulting cluster
MAX_GPUS_PER_NODE = 64
MAX_DEMAND = 10.0  # beyond ×10 a replay of this history says little about that load
MAX_WEIGHT = 1_000_000.0
MAX_CHANGES = 64  # changes of all kinds in one scenario
MAX_SCENARIOS = 16
MAX_SCENARIO_FILE_BYTES = 64 * 1024
MAX_HORIZON_DAYS = 3 * 366
MIN_TREND_DAYS = 2  # a line through one day's count is no trend
DAY_S = 86400.0
ALL = "*"
TODAY = "today"  # the baseline's name: no scenario may take it
UNTYPED = "untyped"  # nodes without a GPU type, as ClusterSpec.gpus_by_type names them
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,39}")
_TYPE = r"([A-Za-z0-9][A-Za-z0-9_.-]{0,39})"
_ADD = re.compile(rf"\s*{_TYPE}\s*:\s*([0-9]{{1,6}})\s*x\s*([0-9]{{1,6}})\s*")
_REMOVE = re.compile(rf"\s*{_TYPE}\s*:\s*(?:([0-9]{{1,6}})\s*x\s*)?([0-9]{{1,6}})\s*")
_ASSIGN = re.compile(r"\s*([^=\s]{1,100})\s*=\s*(\S{1,40})\s*")
_FILE_KEYS = {"name", "add_nodes", "remove_nodes", "share", "demand", "trend", "policy_config"}


@dataclass(frozen=True, slots=True)
class NodeChange:
    """NodeChange is ``count`` nodes of a GPU type (of ``gpus`` GPUs each; None on removal: any size)."""

    gpu_type: str
    count: int
    gpus: int | None = None

    def label(self) -> str:
        """label is the change as the option spells it (``h100:8x4``, ``a100:2``)."""
        size = f"{self.gpus}x" if self.gpus is not None else ""
        return f"{self.gpu_type}:{size}{self.count}"


@dataclass(frozen=True, slots=True)
class Scenario:
    """Scenario is one named what-if: node, share and demand changes, a trend horizon, a policy file."""

    name: str
    add_nodes: tuple[NodeChange, ...] = ()
    remove_nodes: tuple[NodeChange, ...] = ()
    shares: tuple[tuple[str, float], ...] = ()  # tenant -> fair-share weight
    demand: tuple[tuple[str, float], ...] = ()  # tenant or "*" -> factor
    trend_horizon_s: float | None = None  # grow demand by the history's trend to this far past the window
    policy_file: str | None = None
    policy_config: Any = field(default=None, compare=False)  # the policy file as loaded by the caller

    def changes(self) -> list[str]:
        """changes lists the scenario as command-line options, one per change."""
        found = [f"--add-nodes {c.label()}" for c in self.add_nodes]
        found += [f"--remove-nodes {c.label()}" for c in self.remove_nodes]
        found += [f"--share {t}={_number(w)}" for t, w in self.shares]
        found += [f"--demand {t}={_number(f)}" for t, f in self.demand]
        if self.trend_horizon_s is not None:
            found.append(f"--trend --horizon {_days(self.trend_horizon_s)}")
        if self.policy_file:
            found.append(f"--scenario-policy {self.policy_file}")
        return found

    def as_dict(self) -> dict[str, Any]:
        """as_dict is the scenario for --json."""
        return {
            "name": self.name,
            "add_nodes": [{"gpu_type": c.gpu_type, "gpus": c.gpus, "count": c.count} for c in self.add_nodes],
            "remove_nodes": [{"gpu_type": c.gpu_type, "gpus": c.gpus, "count": c.count} for c in self.remove_nodes],
            "shares": dict(self.shares), "demand": dict(self.demand),
            "trend_horizon_days": None if self.trend_horizon_s is None else self.trend_horizon_s / DAY_S,
            "policy_config": self.policy_file,
        }


@dataclass(frozen=True, slots=True)
class Inputs:
    """Inputs is what one replay runs on: rows, cluster, tenants' weights, the policy config, the window's length."""

    rows: list[HistoryRow]
    cluster: ClusterSpec
    weights: dict[str, float]
    policy_config: Any
    window_s: float  # since → cut: where copies may be submitted and over which the trend is fitted


@dataclass(frozen=True, slots=True)
class Trend:
    """Trend is the least-squares growth of rows per day over the window, projected ``horizon_days`` on."""

    days: int
    mean_per_day: float
    slope_per_day: float  # change of the daily rate per day
    horizon_days: float
    projected_per_day: float

    @property
    def factor(self) -> float:
        """factor is the projected daily rate over the window's mean rate."""
        return self.projected_per_day / self.mean_per_day

    def explain(self) -> str:
        """explain says what was fitted and what it projects, in one line."""
        return (f"trend: {self.mean_per_day:.1f} rows (tasks) eligible per day over {self.days} whole days, "
                f"{self.slope_per_day:+.2f} rows/day per day (least squares); {self.horizon_days:g} "
                f"day{'' if self.horizon_days == 1 else 's'} after the window: {self.projected_per_day:.1f} rows/day = demand ×{self.factor:.2f}")

    def as_dict(self) -> dict[str, float]:
        """as_dict is the fit for --json."""
        return {"days": self.days, "mean_per_day": round(self.mean_per_day, 4),
                "slope_per_day": round(self.slope_per_day, 4), "horizon_days": self.horizon_days,
                "projected_per_day": round(self.projected_per_day, 4), "factor": round(self.factor, 4)}


@dataclass
class Applied:
    """Applied is a scenario's inputs after its changes, with its trend fit and what the changes did."""

    inputs: Inputs
    trend: Trend | None = None
    notes: list[str] = field(default_factory=list)


# --- parsing ----------------------------------------------------------------------------------------------------------


def parse_add(text: str) -> NodeChange:
    """parse_add reads ``TYPE:GPUSxCOUNT`` (``h100:8x4``: 4 nodes of 8 h100 GPUs)."""
    match = _ADD.fullmatch(text)
    if not match:
        raise InvalidRequest(f"--add-nodes {text!r}: expected TYPE:GPUSxCOUNT, e.g. h100:8x4 (4 nodes of 8 h100 GPUs)")
    gpu_type, gpus, count = match.group(1), int(match.group(2)), int(match.group(3))
    _check_size(f"--add-nodes {text!r}", gpus)
    return NodeChange(gpu_type, _check_count(f"--add-nodes {text!r}", count), gpus)


def parse_remove(text: str) -> NodeChange:
    """parse_remove reads ``TYPE:COUNT`` or ``TYPE:GPUSxCOUNT`` (only nodes of that many GPUs)."""
    match = _REMOVE.fullmatch(text)
    if not match:
        raise InvalidRequest(f"--remove-nodes {text!r}: expected TYPE:COUNT or TYPE:GPUSxCOUNT, e.g. a100:2")
    gpus = None if match.group(2) is None else _check_size(f"--remove-nodes {text!r}", int(match.group(2)))
    return NodeChange(match.group(1), _check_count(f"--remove-nodes {text!r}", int(match.group(3))), gpus)


def parse_share(text: str) -> tuple[str, float]:
    """parse_share reads ``TENANT=WEIGHT``, the tenant's fair-share weight."""
    tenant, value = _assignment("--share", text, "TENANT=WEIGHT, e.g. tenant-a=50")
    if tenant == ALL:
        raise InvalidRequest(f"--share {text!r}: name one tenant (a weight for every tenant changes nothing)")
    weight = _number_in("--share", text, value)
    if not 0 < weight <= MAX_WEIGHT:
        raise InvalidRequest(f"--share {text!r}: the weight must be above 0 and at most {MAX_WEIGHT:,.0f}")
    return tenant, weight


def parse_demand(text: str) -> tuple[str, float]:
    """parse_demand reads ``TENANT=FACTOR`` or ``*=FACTOR`` (every tenant), a factor from 0 to 10."""
    tenant, value = _assignment("--demand", text, "TENANT=FACTOR or *=FACTOR, e.g. tenant-b=1.5")
    factor = _number_in("--demand", text, value)
    if not 0 <= factor <= MAX_DEMAND:
        raise InvalidRequest(f"--demand {text!r}: the factor must be from 0 to {MAX_DEMAND:g}")
    return tenant, factor


def parse_horizon(text: str) -> float:
    """parse_horizon reads the trend's horizon (``90d``) in seconds, at most about three years."""
    try:
        seconds = parse_duration_s(text)
    except ValueError as exc:
        raise InvalidRequest(f"--horizon {text!r}: {exc}") from None
    if not 0 < seconds <= MAX_HORIZON_DAYS * DAY_S:
        raise InvalidRequest(f"--horizon {text!r}: must be above 0 and at most {MAX_HORIZON_DAYS} days")
    return seconds


def scenario(name: str, *, add: Iterable[str] = (), remove: Iterable[str] = (), share: Iterable[str] = (),
             demand: Iterable[str] = (), horizon: str | None = None, policy_file: str | None = None) -> Scenario:
    """scenario builds one named scenario from option values, refusing repeats, empty and oversized ones."""
    if not _NAME.fullmatch(name) or name == TODAY:
        raise InvalidRequest(f"scenario name {name!r}: 1-40 letters, digits, '_.+-', starting with a letter or "
                             f"digit, and not {TODAY!r}")
    found = Scenario(
        name=name, add_nodes=tuple(parse_add(t) for t in add), remove_nodes=tuple(parse_remove(t) for t in remove),
        shares=_unique("--share", [parse_share(t) for t in share]),
        demand=_unique("--demand", [parse_demand(t) for t in demand]),
        trend_horizon_s=None if horizon is None else parse_horizon(horizon), policy_file=policy_file,
    )
    size = len(found.changes())
    if size == 0:
        raise InvalidRequest(f"scenario {name!r} changes nothing: give --add-nodes, --remove-nodes, --share, "
                             "--demand, --trend or --scenario-policy")
    if size > MAX_CHANGES:
        raise InvalidRequest(f"scenario {name!r} has {size} changes: at most {MAX_CHANGES}")
    return found


def scenarios_from_text(text: str, source: str) -> list[Scenario]:
    """scenarios_from_text reads a TOML (``[[scenario]]``) or YAML (``scenarios:`` list) file's text."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SCENARIO_FILE_BYTES:
        raise InvalidRequest(f"{source}: larger than {MAX_SCENARIO_FILE_BYTES // 1024} KiB")
    try:
        data = tomllib.loads(text) if source.lower().endswith(".toml") else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidRequest(f"{source}: not valid {'TOML' if source.lower().endswith('.toml') else 'YAML'}: "
                             f"{first}") from None
    if isinstance(data, dict):
        keys = set(data) - {"scenario", "scenarios"}
        if keys or len(data) != 1:
            raise InvalidRequest(f"{source}: expected one list 'scenario' (TOML [[scenario]]) or 'scenarios'")
        data = next(iter(data.values()))
    if not isinstance(data, list) or not data:
        raise InvalidRequest(f"{source}: expected a non-empty list of scenarios")
    if len(data) > MAX_SCENARIOS:
        raise InvalidRequest(f"{source}: {len(data)} scenarios, at most {MAX_SCENARIOS}")
    return [_from_entry(entry, f"{source}: scenario {index + 1}") for index, entry in enumerate(data)]


def check_names(scenarios: Sequence[Scenario]) -> None:
    """check_names refuses an empty, oversized or ambiguous list of scenarios."""
    if not scenarios:
        raise InvalidRequest("nothing to compare: give a change (--add-nodes, --remove-nodes, --share, --demand, "
                             "--trend, --scenario-policy) or --scenario-file")
    if len(scenarios) > MAX_SCENARIOS:
        raise InvalidRequest(f"{len(scenarios)} scenarios: at most {MAX_SCENARIOS}")
    seen: set[str] = set()
    for found in scenarios:
        if found.name in seen:
            raise InvalidRequest(f"two scenarios are named {found.name!r} (give each its own name)")
        seen.add(found.name)


def _from_entry(entry: Any, where: str) -> Scenario:
    """_from_entry reads one scenario of a file: the options' names with underscores, values as the options take."""
    if not isinstance(entry, dict):
        raise InvalidRequest(f"{where}: expected a table of name, add_nodes, remove_nodes, share, demand, trend, "
                             "policy_config")
    unknown = sorted(str(key) for key in set(entry) - _FILE_KEYS)
    if unknown:
        raise InvalidRequest(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_FILE_KEYS))})")
    name = entry.get("name")
    if not isinstance(name, str):
        raise InvalidRequest(f"{where}: 'name' (a string) is required")
    trend = entry.get("trend")
    if isinstance(trend, bool) or not isinstance(trend, str | int | float | None):
        raise InvalidRequest(f"{where}: 'trend' is the horizon, e.g. \"90d\"")
    policy_file = entry.get("policy_config")
    if policy_file is not None and not isinstance(policy_file, str):
        raise InvalidRequest(f"{where}: 'policy_config' is a file name")
    return scenario(name, add=_strings(entry, "add_nodes", where), remove=_strings(entry, "remove_nodes", where),
                    share=_strings(entry, "share", where), demand=_strings(entry, "demand", where),
                    horizon=None if trend is None else str(trend), policy_file=policy_file)


def _strings(entry: dict[str, Any], key: str, where: str) -> list[str]:
    """_strings is a key's value as a list of strings (one string is a list of one)."""
    value = entry.get(key, [])
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values) or len(values) > MAX_CHANGES:
        raise InvalidRequest(f"{where}: {key!r} must be a string or a list of at most {MAX_CHANGES} strings")
    return values


def _assignment(option: str, text: str, form: str) -> tuple[str, str]:
    """_assignment splits ``NAME=VALUE`` or refuses it with the expected form."""
    match = _ASSIGN.fullmatch(text)
    if not match:
        raise InvalidRequest(f"{option} {text!r}: expected {form}")
    return match.group(1), match.group(2)


def _number_in(option: str, text: str, value: str) -> float:
    """_number_in reads a finite number of an option's value."""
    try:
        number = float(value)
    except ValueError:
        raise InvalidRequest(f"{option} {text!r}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise InvalidRequest(f"{option} {text!r}: {value!r} is not a finite number")
    return number


def _check_count(option: str, count: int) -> int:
    """_check_count bounds a node count to 1..MAX_NODES."""
    if not 1 <= count <= MAX_NODES:
        raise InvalidRequest(f"{option}: the node count must be from 1 to {MAX_NODES:,}")
    return count


def _check_size(option: str, gpus: int) -> int:
    """_check_size bounds GPUs per node to 1..MAX_GPUS_PER_NODE."""
    if not 1 <= gpus <= MAX_GPUS_PER_NODE:
        raise InvalidRequest(f"{option}: GPUs per node must be from 1 to {MAX_GPUS_PER_NODE}")
    return gpus


def _unique(option: str, pairs: list[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    """_unique refuses a tenant named twice in one option (which value would win is a guess)."""
    seen: set[str] = set()
    for tenant, _ in pairs:
        if tenant in seen:
            raise InvalidRequest(f"{option}: {tenant!r} is given twice")
        seen.add(tenant)
    return tuple(pairs)


def _number(value: float) -> str:
    """_number prints a number without a needless fraction."""
    return f"{value:g}"


def _days(seconds: float) -> str:
    """_days prints a horizon in days."""
    return f"{seconds / DAY_S:g}d"


# --- applying -------------------------------------------------------------------------------------------------------


def apply_scenario(found: Scenario, base: Inputs) -> Applied:
    """apply_scenario is the inputs with the scenario's changes; refuses unknown tenants and impossible node changes."""
    tenants = set(base.weights) | {row.tenant for row in base.rows}
    for tenant, _ in found.shares:
        _known("--share", tenant, tenants)
    for tenant, _ in found.demand:
        if tenant != ALL:
            _known("--demand", tenant, {row.tenant for row in base.rows}, "has no rows in the window")
    cluster = edit_cluster(base.cluster, found.add_nodes, found.remove_nodes)
    weights = dict(base.weights) | dict(found.shares)
    trend = fit_trend(base.rows, base.window_s, found.trend_horizon_s) if found.trend_horizon_s is not None else None
    factors = _factors(found.demand, trend, tenants)
    rows = scale_demand(base.rows, factors, base.window_s) if factors else list(base.rows)
    config = base.policy_config if found.policy_config is None else found.policy_config
    applied = Applied(Inputs(rows, cluster, weights, config, base.window_s), trend)
    if factors:
        scaled = ", ".join(f"{t} ×{f:.3g}" for t, f in sorted(factors.items()) if f != 1.0)
        applied.notes.append(f"demand: {len(base.rows)} rows -> {len(rows)} ({scaled})")
    return applied


def _known(option: str, tenant: str, known: set[str], why: str = "is not a tenant of the site or the window") -> None:
    """_known refuses a tenant the history does not know, naming the ones it does."""
    if tenant not in known:
        listed = ", ".join(sorted(known)[:20]) or "none"
        raise InvalidRequest(f"{option}: {tenant!r} {why} (known: {listed})")


def _factors(demand: Sequence[tuple[str, float]], trend: Trend | None, tenants: set[str]) -> dict[str, float]:
    """_factors is each tenant's demand factor: ``*``, its own and the trend's multiplied; empty when all are 1."""
    every = dict(demand).get(ALL, 1.0) * (trend.factor if trend else 1.0)
    own = {tenant: factor for tenant, factor in demand if tenant != ALL}
    factors = {tenant: every * own.get(tenant, 1.0) for tenant in tenants}
    for tenant, factor in sorted(factors.items()):
        if factor > MAX_DEMAND:
            why = f" ({trend.explain()})" if trend else ""
            raise InvalidRequest(f"the demand of {tenant!r} would grow ×{factor:.3g}: at most ×{MAX_DEMAND:g} "
                                 f"(lower --demand or --horizon){why}")
    return {} if all(factor == 1.0 for factor in factors.values()) else factors


def scale_demand(rows: Sequence[HistoryRow], factors: dict[str, float], window_s: float) -> list[HistoryRow]:
    """scale_demand replays each tenant's row i floor((i+1)f) − floor(i f) times (module docstring), in eligible order."""
    by_tenant: dict[str, list[HistoryRow]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: (r.submit_time, r.job_id)):
        by_tenant[row.tenant].append(row)
    out: list[HistoryRow] = []
    for tenant, own in by_tenant.items():
        # thousandths in integers: the same factor always keeps and copies the same rows (no float drift)
        milli = round(factors.get(tenant, 1.0) * 1000)
        # after the tenant's last row, its mean gap (within the window): the copies stay in its rhythm
        mean_gap = (own[-1].submit_time - own[0].submit_time) / (len(own) - 1) if len(own) > 1 else 0.0
        for i, row in enumerate(own):
            times = (i + 1) * milli // 1000 - i * milli // 1000
            following = (own[i + 1].submit_time if i + 1 < len(own)
                         else max(row.submit_time, min(window_s, row.submit_time + mean_gap)))
            gap = (following - row.submit_time) / times if times else 0.0
            out.extend(row if n == 0 else replace(row, job_id=f"{row.job_id}~{n}", submit_time=row.submit_time + n * gap)
                       for n in range(times))
    out.sort(key=lambda r: (r.submit_time, r.job_id))
    return out


def fit_trend(rows: Sequence[HistoryRow], window_s: float, horizon_s: float) -> Trend:
    """fit_trend fits rows eligible per whole day of the window by least squares and projects it ``horizon_s`` on."""
    days = int(window_s // DAY_S)
    if days < MIN_TREND_DAYS:
        raise InvalidRequest(f"--trend needs at least {MIN_TREND_DAYS} whole days of history "
                             f"(the window has {window_s / DAY_S:.1f})")
    counts = [0] * days
    for row in rows:
        day = int(row.submit_time // DAY_S)
        if 0 <= day < days:  # the last, partial day would read as a drop
            counts[day] += 1
    mean = sum(counts) / days
    if mean == 0:
        raise InvalidRequest("--trend: no row became eligible in the window's whole days: no rate to project")
    middle = days / 2  # the centre of the day centres 0.5 … days − 0.5
    spread = sum((i + 0.5 - middle) ** 2 for i in range(days))
    slope = sum((i + 0.5 - middle) * (c - mean) for i, c in enumerate(counts)) / spread
    horizon_days = horizon_s / DAY_S
    projected = mean + slope * (days + horizon_days - middle)
    if projected <= 0:
        raise InvalidRequest(f"--trend: the fitted line ({slope:+.2f} rows/day per day from {mean:.1f}/day) reaches "
                             f"no rows {horizon_days:g} days on: shorten --horizon")
    return Trend(days, mean, slope, horizon_days, projected)


def edit_cluster(cluster: ClusterSpec, add: Sequence[NodeChange], remove: Sequence[NodeChange]) -> ClusterSpec:
    """edit_cluster removes nodes from the site's groups, then adds groups shaped like the site's (module docstring)."""
    templates = [_template(cluster, change) for change in add]  # from the site as it is, before removals
    groups = list(cluster.node_groups)
    for change in remove:
        groups = _remove(groups, change)
    names = {group.name for group in groups}
    for index, (change, template) in enumerate(zip(add, templates, strict=True)):
        name = f"added-{change.gpu_type}x{change.gpus}-{index}"
        while name in names:
            name += "+"
        names.add(name)
        groups.append(template.model_copy(update={"name": name, "count": change.count, "gpus": change.gpus}))
    edited = cluster.model_copy(update={"node_groups": [group for group in groups if group.count]})
    total = edited.node_count()
    if total == 0:
        raise InvalidRequest("the scenario removes every node: nothing left to simulate")
    if total > MAX_NODES:
        raise InvalidRequest(f"the scenario's cluster has {total:,} nodes: at most {MAX_NODES:,}")
    return edited


def gpu_type_of(group: NodeGroup) -> str:
    """gpu_type_of names a group's GPU type as the options do (``untyped`` for none)."""
    return group.gpu_type or UNTYPED


def _types(groups: Iterable[NodeGroup]) -> str:
    """_types lists the GPU types of the groups that have nodes."""
    return ", ".join(sorted({gpu_type_of(g) for g in groups if g.count and g.gpus})) or "none"


def _template(cluster: ClusterSpec, change: NodeChange) -> NodeGroup:
    """_template is the group new nodes copy: the largest of the type, preferring the same GPUs per node."""
    same_type = [g for g in cluster.node_groups if g.count and g.gpus and gpu_type_of(g) == change.gpu_type]
    if not same_type:
        raise InvalidRequest(f"--add-nodes {change.label()}: the cluster has no {change.gpu_type} node to copy "
                             f"cpus, memory, switch and partitions from (types: {_types(cluster.node_groups)})")
    same_size = [g for g in same_type if g.gpus == change.gpus] or same_type
    return max(same_size, key=lambda g: g.count)  # max keeps the first of equals: the listing's order decides


def _remove(groups: list[NodeGroup], change: NodeChange) -> list[NodeGroup]:
    """_remove takes ``change.count`` nodes of the type, one at a time from the largest remaining group."""
    pool = [i for i, g in enumerate(groups)
            if g.count and g.gpus and gpu_type_of(g) == change.gpu_type and change.gpus in (None, g.gpus)]
    have = sum(groups[i].count for i in pool)
    if have < change.count:
        size = f"{change.gpus}-GPU " if change.gpus is not None else ""
        raise InvalidRequest(f"--remove-nodes {change.label()}: the cluster has {have} {size}{change.gpu_type} "
                             f"node{'s' if have != 1 else ''} (types: {_types(groups)})")
    counts = {i: groups[i].count for i in pool}
    for _ in range(change.count):
        largest = max(pool, key=lambda i: (counts[i], -i))
        counts[largest] -= 1
    return [g.model_copy(update={"count": counts[i]}) if i in counts else g for i, g in enumerate(groups)]

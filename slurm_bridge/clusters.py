"""ClusterSet: one SlurmClient over several Slurm clusters, names qualified by cluster (issue 26).

The rest of metasched sees one Slurm whose node names, job ids and reservation names read
``<cluster>/<name>`` (``dev2/b-a100n1``, ``dev2/123``, ``dev2/ms-hold-x``); ClusterSet adds the
prefix on every read and strips it on every write, which goes to the cluster the names say.
With one cluster no ClusterSet is used and nothing is qualified.

A read that spans clusters fails when any cluster's read fails: a partial answer would make the
missing cluster's jobs look gone to the reconciler and its nodes look removed to the scheduler.

Accounting questions (QOS, associations, shares), the configuration and sdiag are answered by
the first ("home") cluster. This assumes the clusters share one slurmdbd, as
``deploy/devcluster up --second`` sets up; clusters with separate slurmdbds are future work.
Adoption of held plain sbatch jobs is one cluster's feature for now: ``squeue_json`` only marks
each entry with its cluster.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from meta.model.clusters import check_cluster_name, job_ref, qualify, split_qualified
from slurm_bridge import hostlist
from slurm_bridge.call_records import CallObserver
from slurm_bridge.client import SlurmClient
from slurm_bridge.commands import CliSlurmClient, Timeouts
from slurm_bridge.errors import SlurmError, SlurmRejected, SlurmTransient, SlurmUnknownOutcome
from slurm_bridge.launch import RunAs
from slurm_bridge.parse.config import SlurmConfig
from slurm_bridge.parse.sacct import SacctJob
from slurm_bridge.parse.sacctmgr import AccountShares, UserAssociations
from slurm_bridge.parse.scontrol import ScontrolJob, ScontrolNode, SlurmReservation
from slurm_bridge.parse.sdiag import Sdiag
from slurm_bridge.parse.sinfo import SinfoNode
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.parse.topology import Switch
from slurm_bridge.reservations import ReservationSpec
from slurm_bridge.runner import CommandRunner

T = TypeVar("T")
N = TypeVar("N", SinfoNode, ScontrolNode)

# the two #SBATCH options that name cluster objects, as slurm_bridge.render writes them
_ROUTED_OPTION = re.compile(
    r"^(?P<head>#SBATCH\s+--(?P<key>nodelist|reservation)=)(?P<value>\S+)(?P<tail>\s*)$"
)


@dataclass(frozen=True, slots=True)
class ClusterAccess:
    """ClusterAccess says how to reach one cluster: its name, its own SLURM_CONF file (None: the default), or -M."""

    name: str
    slurm_conf: str | None = None
    by_name: bool = False  # -M NAME through the default slurm.conf and the shared slurmdbd

    def __post_init__(self) -> None:
        check_cluster_name(self.name)


def cluster_client(
    access: ClusterAccess,
    timeouts: Timeouts | None = None,
    runner_env: Mapping[str, str] | None = None,
    *,
    bin_dir: str | None = None,
    observer: CallObserver | None = None,
) -> CliSlurmClient:
    """cluster_client is a CliSlurmClient whose commands reach the cluster: its SLURM_CONF, or -M NAME."""
    env = dict(os.environ if runner_env is None else runner_env)
    if access.slurm_conf:
        # every CLI (and sbatch's job, see job_env) finds this cluster's controller through it
        env["SLURM_CONF"] = access.slurm_conf
    cluster = access.name if access.by_name else None
    return CliSlurmClient(CommandRunner(env=env, bin_dir=bin_dir, observer=observer, cluster=cluster), timeouts)


def _qualified(cluster: str, names: Iterable[str]) -> tuple[str, ...]:
    """_qualified qualifies every name."""
    return tuple(qualify(cluster, name) for name in names)


def _qualified_reservation(cluster: str, name: str | None) -> str | None:
    """_qualified_reservation qualifies a job's reservation, keeping None and '' as they are."""
    return qualify(cluster, name) if name else name


def _node(cluster: str, node: N) -> N:
    """_node is a node record (sinfo or scontrol) under its qualified name (``raw`` stays Slurm's)."""
    return replace(node, name=qualify(cluster, node.name))


def _squeue_job(cluster: str, job: SqueueJob) -> SqueueJob:
    """_squeue_job is a squeue record as the cluster set shows it."""
    nodes = _qualified(cluster, job.nodes)
    return replace(
        job, cluster=cluster, nodes=nodes, nodelist=",".join(nodes) if nodes else job.nodelist,
        reservation=_qualified_reservation(cluster, job.reservation),
    )  # fmt: skip


def _sacct_job(cluster: str, job: SacctJob) -> SacctJob:
    """_sacct_job is an accounting record as the cluster set shows it."""
    nodes = _qualified(cluster, job.nodes)
    return replace(
        job, cluster=cluster, nodes=nodes, reservation=_qualified_reservation(cluster, job.reservation)
    )


def _scontrol_job(cluster: str, job: ScontrolJob) -> ScontrolJob:
    """_scontrol_job is a ``scontrol show job`` record as the cluster set shows it (``raw`` stays Slurm's)."""
    nodes = _qualified(cluster, job.nodes)
    return replace(
        job, cluster=cluster, nodes=nodes, reservation=_qualified_reservation(cluster, job.reservation)
    )


def _switch(cluster: str, switch: Switch) -> Switch:
    """_switch qualifies a switch's name, its nodes and its child switches."""
    return replace(
        switch, name=qualify(cluster, switch.name), nodes=_qualified(cluster, switch.nodes),
        switches=_qualified(cluster, switch.switches),
    )  # fmt: skip


def _reservation(cluster: str, reservation: SlurmReservation) -> SlurmReservation:
    """_reservation qualifies a reservation's name and nodes."""
    return replace(
        reservation, name=qualify(cluster, reservation.name), nodes=_qualified(cluster, reservation.nodes)
    )


def _header_length(lines: Sequence[str]) -> int:
    """_header_length counts the leading blank and comment lines: sbatch reads #SBATCH options only there."""
    for index, line in enumerate(lines):
        if line.strip() and not line.lstrip().startswith("#"):
            return index
    return len(lines)


PROBE_EVERY_S = 10.0  # how often a dark cluster's controller is asked again (sdiag), off the period


class Reachability:
    """Reachability remembers which clusters failed a call; a dark one is asked again only by a probe.

    A read of a cluster whose slurmctld is gone takes Slurm's connect retries (9 s measured on
    22.05): asking it again in every period would stretch every cluster's period by that much.
    So a dark cluster is left out of the periods, and a prober thread asks its controller
    every ``every_s`` until it answers; the next period reads it again.
    """

    def __init__(self, probe: Callable[[str], None], every_s: float = PROBE_EVERY_S, background: bool = True) -> None:
        self.probe = probe
        self.every_s = every_s
        self.background = background
        self._down: dict[str, tuple[float, str]] = {}  # cluster -> (dark since, monotonic; what failed)
        self._lock = threading.Lock()
        self._prober: threading.Thread | None = None
        self._stop = threading.Event()

    def failed(self, cluster: str, error: SlurmError) -> None:
        """failed marks the cluster dark (and starts the prober)."""
        with self._lock:
            since = self._down[cluster][0] if cluster in self._down else time.monotonic()
            self._down[cluster] = (since, (str(error).splitlines() or [""])[0][:200] or "no answer")
            if self.background and (self._prober is None or not self._prober.is_alive()):
                self._prober = threading.Thread(target=self._probe_loop, name="cluster-prober", daemon=True)
                self._prober.start()

    def forget(self, cluster: str) -> None:
        """forget drops a cluster that left the site."""
        with self._lock:
            self._down.pop(cluster, None)

    def answered(self, cluster: str) -> None:
        """answered: the cluster is reachable again."""
        with self._lock:
            self._down.pop(cluster, None)

    def resting(self, cluster: str) -> str:
        """resting is why the cluster is not asked now ('' when it may be asked)."""
        with self._lock:
            return self._down[cluster][1] if cluster in self._down else ""

    def dark(self) -> dict[str, float]:
        """dark are the clusters whose last call failed and no probe has answered since, with seconds dark."""
        now = time.monotonic()
        with self._lock:
            return {cluster: now - since for cluster, (since, _) in self._down.items()}

    def probe_dark(self) -> None:
        """probe_dark asks every dark cluster's controller once; those that answer are reachable again."""
        for cluster in sorted(self.dark()):
            try:
                self.probe(cluster)
            except Exception:  # noqa: BLE001 - any failure of the probe: still dark, asked again later
                continue
            self.answered(cluster)

    def close(self) -> None:
        """close stops the prober."""
        self._stop.set()

    def _probe_loop(self) -> None:
        """_probe_loop probes until no cluster is dark (or close); bounded by the clusters' outage."""
        while self.dark() and not self._stop.wait(self.every_s):
            self.probe_dark()


def site_clusters(client: object) -> tuple[str, ...]:
    """site_clusters are a ClusterSet's cluster names, the home cluster first (empty for one cluster's client)."""
    clusters = getattr(client, "clusters", None)
    return tuple(clusters) if isinstance(clusters, tuple) else ()


def unreachable_clusters(client: object) -> dict[str, float]:
    """unreachable_clusters are the dark clusters of a ClusterSet and how long each has been dark (none for one cluster)."""
    unreachable = getattr(client, "unreachable", None)
    return dict(unreachable()) if callable(unreachable) else {}


class ClusterSet:
    """ClusterSet is a SlurmClient over several clusters' clients; the first is the home cluster."""

    def __init__(
        self, clients: Mapping[str, SlurmClient], *, probe_every_s: float = PROBE_EVERY_S, background: bool = True,
        connect: Callable[[str], SlurmClient] | None = None,
    ) -> None:
        if not clients:
            raise ValueError("a cluster set needs at least one cluster")
        # replaced whole, never changed in place: a read or the prober iterates a snapshot of it
        self._clients = {check_cluster_name(name): client for name, client in clients.items()}
        # sdiag: the cheapest question only the cluster's own slurmctld answers
        self._reach = Reachability(lambda cluster: self._clients[cluster].sdiag(), probe_every_s, background)
        self._last: dict[tuple[str, str], list[Any]] = {}  # (read, cluster) -> its last good answer
        # clusters: auto — a client for a cluster slurmdbd lists (follow_registry); None: a fixed list
        self._connect = connect

    @property
    def follows_registry(self) -> bool:
        """follows_registry tells whether the set follows slurmdbd's cluster list (``clusters: auto``)."""
        return self._connect is not None

    def follow_registry(self, keep: Collection[str] = ()) -> tuple[list[str], list[str]]:
        """follow_registry makes the members the clusters slurmdbd lists; returns (added, removed).

        The home cluster always stays; so does every cluster in ``keep`` (those with live
        attempts: dropping one would make its jobs look lost), until it is no longer listed and
        no longer kept. A fixed set (no ``connect``) never changes. SlurmError when slurmdbd
        does not answer: the members stay as they are.
        """
        if self._connect is None:
            return [], []
        current = self._clients
        listed = [check_cluster_name(name) for name in self.home.registered_clusters()]
        home = next(iter(current))
        wanted = [home] + [n for n in listed if n != home] + [n for n in current if n in keep and n not in listed]
        clients = {name: current[name] if name in current else self._connect(name) for name in dict.fromkeys(wanted)}
        added, removed = [n for n in clients if n not in current], [n for n in current if n not in clients]
        self._clients = clients
        for name in removed:
            self._reach.forget(name)
            self._last = {key: value for key, value in self._last.items() if key[1] != name}
        return added, removed

    def unreachable(self) -> dict[str, float]:
        """unreachable are the clusters whose last read failed (with seconds dark): their jobs are not judged, their nodes not used."""
        return self._reach.dark()

    def probe_dark(self) -> None:
        """probe_dark asks each dark cluster once now (the prober does it every probe_every_s)."""
        self._reach.probe_dark()

    def close(self) -> None:
        """close stops the prober thread."""
        self._reach.close()

    @property
    def clusters(self) -> tuple[str, ...]:
        """clusters are the cluster names, the home cluster first."""
        return tuple(self._clients)

    @property
    def home(self) -> SlurmClient:
        """home is the first cluster's client, which answers accounting and configuration questions."""
        return next(iter(self._clients.values()))

    def client(self, name: str) -> SlurmClient:
        """client is one cluster's own client (ValueError for an unknown cluster)."""
        if name not in self._clients:
            raise ValueError(f"unknown cluster {name!r} (known: {', '.join(self._clients)})")
        return self._clients[name]

    # --- naming ------------------------------------------------------------------------------

    def _route(self, ref: int | str, what: str) -> tuple[str, str]:
        """_route splits a qualified name into its known cluster and the bare name."""
        cluster, name = split_qualified(str(ref))
        if not cluster or cluster not in self._clients:
            raise ValueError(
                f"{what} {str(ref)!r} does not name one of the clusters {', '.join(self._clients)}"
            )
        return cluster, name

    def _one_cluster(self, names: Iterable[str], what: str) -> tuple[str, tuple[str, ...]]:
        """_one_cluster is the one known cluster of qualified node names and the bare names."""
        routed = [self._route(name, f"{what}: node") for name in names]
        clusters = sorted({cluster for cluster, _ in routed})
        if not clusters:
            raise ValueError(f"{what}: no nodes to tell the cluster by")
        if len(clusters) > 1:
            raise ValueError(f"{what}: nodes on several clusters ({', '.join(clusters)}); it must fit on one")
        return clusters[0], tuple(name for _, name in routed)

    def _bare_on(self, cluster: str, name: str, what: str) -> str:
        """_bare_on strips ``cluster``'s prefix from a name (a bare name stays); another cluster's is refused."""
        prefix, bare = split_qualified(name)
        if prefix and prefix != cluster:
            raise ValueError(f"{what} {name!r} is not on cluster {cluster!r}")
        return bare

    def _gather(
        self, read: Callable[[SlurmClient], Iterable[T]], local: Callable[[str, T], T], kind: str, stale: bool = False
    ) -> list[T]:
        """_gather reads every reachable cluster in order and turns each record into the set's view.

        A bulkhead: a cluster whose read fails (or that rests after a failure) adds its last good
        answer when ``stale`` (nodes, switches, reservations: they must not vanish while it is
        dark) and nothing otherwise (jobs: the reconciler does not judge a dark cluster's
        attempts). Only when no cluster answered does the read fail.
        """
        found: list[T] = []
        errors: list[SlurmError] = []
        clients = self._clients
        for cluster, client in clients.items():
            try:
                answer = self._read_one(cluster, client, read, kind)
            except SlurmError as error:
                errors.append(error)
                answer = self._last.get((kind, cluster), []) if stale else []
            found.extend(local(cluster, item) for item in answer)
        if len(errors) == len(clients):
            raise errors[0]
        return found

    def _read_one(self, cluster: str, client: SlurmClient, read: Callable[[SlurmClient], Iterable[T]],
                  kind: str) -> list[T]:  # fmt: skip
        """_read_one is one cluster's answer, remembered; a resting cluster is not asked (SlurmTransient)."""
        self._writable(cluster)
        try:
            answer = list(read(client))
        except SlurmError as error:
            self._reach.failed(cluster, error)
            raise
        self._reach.answered(cluster)
        self._last[(kind, cluster)] = answer
        return answer

    def _writable(self, cluster: str) -> SlurmClient:
        """_writable is the cluster's client, unless it rests after a failure (then SlurmTransient at once)."""
        problem = self._reach.resting(cluster)
        if problem:
            raise SlurmTransient(f"cluster {cluster} is unreachable ({problem}); probed every "
                                 f"{self._reach.every_s:g} s", command="")
        return self._clients[cluster]

    def _write(self, cluster: str, call: Callable[[SlurmClient], T]) -> T:
        """_write runs one mutating call on a cluster; its controller not answering makes the cluster dark."""
        client = self._writable(cluster)
        try:
            return call(client)
        except (SlurmTransient, SlurmUnknownOutcome) as error:
            self._reach.failed(cluster, error)
            raise

    # --- jobs --------------------------------------------------------------------------------

    def submit(self, script: str, *, timeout_s: float | None = None, run_as: RunAs | None = None) -> str:
        """submit sends the script to the cluster of its ``--nodelist`` (bare names) and returns ``<cluster>/<id>``."""
        try:
            cluster, local = self.localize_script(script)
        except ValueError as exc:  # nothing was sent: a refusal, never an outcome to look up
            raise SlurmRejected(f"cannot choose a cluster for this job: {exc}", command="sbatch") from None
        job_id = self._write(cluster, lambda client: client.submit(local, timeout_s=timeout_s, run_as=run_as))
        return job_ref(job_id, cluster)

    def localize_script(self, script: str) -> tuple[str, str]:
        """localize_script is the cluster a script's ``#SBATCH --nodelist`` lines name and the script with bare names.

        Only the leading comment block counts (sbatch reads options nowhere else): a user's
        command may hold ``#SBATCH`` text further down, which stays as written.
        """
        lines = script.splitlines(keepends=True)
        found = {
            index: match
            for index in range(_header_length(lines))
            if (match := _ROUTED_OPTION.match(lines[index])) is not None
        }
        nodes = [
            node for m in found.values() if m["key"] == "nodelist" for node in hostlist.expand(m["value"])
        ]
        cluster, _ = self._one_cluster(nodes, "the script's --nodelist")
        for index, match in found.items():
            lines[index] = match["head"] + self._local_value(cluster, match) + match["tail"]
        return cluster, "".join(lines)

    def _local_value(self, cluster: str, match: re.Match[str]) -> str:
        """_local_value is a routed option's value with the cluster's prefixes stripped."""
        if match["key"] == "reservation":
            return self._bare_on(cluster, match["value"], "the script's --reservation")
        _, bare = self._one_cluster(hostlist.expand(match["value"]), "the script's --nodelist")
        return hostlist.compress(bare)

    def cancel(self, job_ids: Sequence[int | str], signal: str | None = None) -> None:
        """cancel cancels (or signals) ``<cluster>/<id>`` jobs, one scancel per cluster.

        Every id is checked before anything is sent; one cluster's failure does not keep the
        others' jobs from being cancelled (the first error is raised after all were tried).
        """
        groups: dict[str, list[str]] = {}
        for job_id in job_ids:
            cluster, bare = self._route(job_id, "job id")
            groups.setdefault(cluster, []).append(bare)
        errors: list[Exception] = []
        for cluster, ids in groups.items():
            try:
                self._write(cluster, lambda client, ids=ids: client.cancel(ids, signal))
            except Exception as error:  # noqa: BLE001 - raised below, once every cluster was tried
                errors.append(error)
        if errors:
            raise errors[0]

    def squeue(self) -> list[SqueueJob]:
        """squeue lists every cluster's jobs, each with its cluster and qualified nodes."""
        return self._gather(lambda client: client.squeue(), _squeue_job, "squeue")

    def squeue_json(self) -> list[dict[str, Any]]:
        """squeue_json is every cluster's ``squeue --json`` entries, each with a ``cluster`` key (no other change).

        Adoption of held jobs across clusters is out of scope: the entries' names stay bare.
        """
        return self._gather(
            lambda client: client.squeue_json(), lambda cluster, entry: {**entry, "cluster": cluster}, "squeue_json"
        )

    def release_held(self, job_id: int | str, nodes: Sequence[str], comment: str) -> None:
        """release_held releases ``<cluster>/<id>`` onto nodes of that same cluster."""
        cluster, bare = self._route(job_id, "job id")
        on = [self._route(node, "node")[0] for node in nodes]
        if any(node_cluster != cluster for node_cluster in on):
            raise ValueError(f"job {job_id} is on cluster {cluster!r}, not all of {list(nodes)!r} are")
        self._clients[cluster].release_held(bare, [split_qualified(node)[1] for node in nodes], comment)

    def set_comment(self, job_id: int | str, comment: str) -> None:
        """set_comment sets the comment of ``<cluster>/<id>`` on its cluster."""
        cluster, bare = self._route(job_id, "job id")
        self._clients[cluster].set_comment(bare, comment)

    def sacct(self, since: datetime, until: datetime | None = None) -> list[SacctJob]:
        """sacct lists every cluster's records in the window, each with its cluster and qualified nodes."""
        return self._gather(lambda client: client.sacct(since, until), _sacct_job, "sacct")

    def show_jobs(self) -> list[ScontrolJob]:
        """show_jobs lists every cluster's ``scontrol show job`` records with cluster and qualified nodes."""
        return self._gather(lambda client: client.show_jobs(), _scontrol_job, "show_jobs")

    # --- nodes -------------------------------------------------------------------------------

    def sinfo(self) -> list[SinfoNode]:
        """sinfo lists every cluster's nodes under qualified names."""
        return self._gather(lambda client: client.sinfo(), _node, "sinfo", stale=True)

    def show_nodes(self) -> list[ScontrolNode]:
        """show_nodes lists every cluster's ``scontrol show node`` records under qualified names."""
        return self._gather(lambda client: client.show_nodes(), _node, "show_nodes", stale=True)

    def topology(self) -> dict[str, Switch]:
        """topology is every cluster's switch tree, switch and node names qualified (one cluster's failure raises)."""
        switches = self._gather(lambda client: client.topology().values(), _switch, "topology", stale=True)
        return {switch.name: switch for switch in switches}

    # --- reservations ------------------------------------------------------------------------

    def reservations(self) -> list[SlurmReservation]:
        """reservations lists every cluster's reservations, names and nodes qualified."""
        return self._gather(lambda client: client.reservations(), _reservation, "reservations", stale=True)

    def _local_spec(self, spec: ReservationSpec) -> tuple[str, ReservationSpec]:
        """_local_spec is the cluster of a spec's nodes and the spec with bare nodes and a bare name."""
        cluster, nodes = self._one_cluster(spec.nodes, f"reservation {spec.name}")
        # ReservationSpec checks its name with check_token: the bare name is what Slurm gets
        return cluster, replace(spec, name=self._bare_on(cluster, spec.name, "reservation"), nodes=nodes)

    def create_reservation(self, spec: ReservationSpec) -> str:
        """create_reservation creates the reservation on its nodes' cluster and returns ``<cluster>/<name>``."""
        cluster, local = self._local_spec(spec)
        return qualify(cluster, self._write(cluster, lambda client: client.create_reservation(local)))

    def update_reservation(self, spec: ReservationSpec, *, move_start: bool = True) -> None:
        """update_reservation updates the reservation on its nodes' cluster."""
        cluster, local = self._local_spec(spec)
        self._write(cluster, lambda client: client.update_reservation(local, move_start=move_start))

    def delete_reservation(self, name: str) -> None:
        """delete_reservation deletes ``<cluster>/<name>`` on its cluster."""
        cluster, bare = self._route(name, "reservation")
        self._write(cluster, lambda client: client.delete_reservation(bare))

    # --- global reads (the home cluster; one shared slurmdbd) ----------------------------------

    def qos_names(self) -> list[str]:
        """qos_names is the home cluster's answer (the clusters share one slurmdbd)."""
        return self.home.qos_names()

    def user_associations(self, user: str | None = None) -> list[UserAssociations]:
        """user_associations is the home cluster's answer (the clusters share one slurmdbd)."""
        return self.home.user_associations(user)

    def registered_clusters(self) -> list[str]:
        """registered_clusters is the home cluster's answer (the clusters share one slurmdbd)."""
        return self.home.registered_clusters()

    def account_shares(self) -> list[AccountShares]:
        """account_shares is the home cluster's answer (the clusters share one slurmdbd)."""
        return self.home.account_shares()

    def slurm_config(self) -> SlurmConfig:
        """slurm_config is the home cluster's configuration."""
        return self.home.slurm_config()

    def sdiag(self) -> Sdiag:
        """sdiag is the home cluster's controller statistics."""
        return self.home.sdiag()

"""ClusterSet: one SlurmClient over two fake clusters, names qualified by cluster (issue 26)."""

from __future__ import annotations

import inspect
import os
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from meta.model.clusters import job_ref, qualify, split_qualified
from meta.model.kinds import JobKind
from meta.model.resources import ResourceVector
from slurm_bridge import hostlist
from slurm_bridge.client import SlurmClient
from slurm_bridge.clusters import ClusterAccess, ClusterSet, cluster_client, unreachable_clusters
from slurm_bridge.commands import Timeouts
from slurm_bridge.errors import SlurmRejected, SlurmTransient
from slurm_bridge.fake import FakeSlurm, sinfo_node
from slurm_bridge.launch import LaunchRequest, Role
from slurm_bridge.parse.config import SlurmConfig
from slurm_bridge.parse.scontrol import ScontrolJob, ScontrolNode, parse_show_job, parse_show_node
from slurm_bridge.parse.sdiag import Sdiag, parse_sdiag
from slurm_bridge.parse.topology import Switch, leaf_of_node
from slurm_bridge.render import render
from slurm_bridge.reservations import ReservationSpec

ATTEMPT = "3f2a9c1e-7b4d-4c1a-9e0f-2b8d5a6c7e10"
SITE = "k3x9m2q7r4vd"
SINCE = datetime.now(UTC) - timedelta(hours=1)


class FakeCluster(FakeSlurm):
    """FakeCluster is a FakeSlurm with the calls it lacks (scontrol reads, squeue --json, adoption), recorded."""

    def __init__(self, name: str, node_names: list[str]) -> None:
        # both clusters number jobs from 1000: the same id names two different jobs
        super().__init__([sinfo_node(node) for node in node_names], first_job_id=1000)
        self.config = SlurmConfig(cluster_name=name, slurm_user="slurm", slurm_user_uid=64030)
        self.released: list[tuple[str, tuple[str, ...], str]] = []
        self.comments: list[tuple[str, str]] = []
        self.thread_count = int(name[-1])  # tells the clusters' sdiag apart

    def show_nodes(self) -> list[ScontrolNode]:
        return parse_show_node("".join(f"NodeName={name} State=IDLE\n" for name in self.nodes))

    def show_jobs(self) -> list[ScontrolJob]:
        lines = [
            f"JobId={job.job_id} JobName={job.name} JobState={job.state} "
            f"NodeList={hostlist.compress(job.nodes) or '(null)'} Reservation=hold-{job.job_id}\n"
            for job in self.jobs.values()
        ]
        return parse_show_job("".join(lines))

    def squeue_json(self) -> list[dict]:
        return [{"job_id": job.job_id, "nodes": hostlist.compress(job.nodes)} for job in self.jobs.values()]

    def release_held(self, job_id: int | str, nodes, comment: str) -> None:  # noqa: ANN001
        self.released.append((str(job_id), tuple(nodes), comment))

    def set_comment(self, job_id: int | str, comment: str) -> None:
        self.comments.append((str(job_id), comment))

    def sdiag(self) -> Sdiag:
        return parse_sdiag(f"Server thread count: {self.thread_count}\n")


@pytest.fixture
def dev1() -> FakeCluster:
    return FakeCluster("dev1", ["a100n1", "a100n2", "gpu1"])


@pytest.fixture
def dev2() -> FakeCluster:
    return FakeCluster("dev2", ["b-a100n1", "b-a100n2", "gpu1"])  # "gpu1" on both clusters


@pytest.fixture
def site(dev1: FakeCluster, dev2: FakeCluster) -> ClusterSet:
    return ClusterSet({"dev1": dev1, "dev2": dev2})


def script(*nodelists: str, reservation: str | None = None, body: str = "exec true\n") -> str:
    """script is a small sbatch script with one component per nodelist."""
    lines = ["#!/bin/bash", "#SBATCH --job-name=x"]
    for index, nodelist in enumerate(nodelists):
        lines += ["#SBATCH hetjob"] if index else []
        lines += [f"#SBATCH --reservation={reservation}"] if reservation else []
        lines.append(f"#SBATCH --nodelist={nodelist}")
    return "\n".join(lines) + "\n" + body


def launch_request(**changes: object) -> LaunchRequest:
    """launch_request is an attempt as the actuator would render it."""
    fields: dict = dict(
        attempt_id=ATTEMPT, attempt_number=1, fencing_token=1, job_id="job-1", task_id="job-1/0",
        tenant="tenant-a", kind=JobKind.TRAINING, time_limit_s=3600, site=SITE, command="python train.py",
        per_node=ResourceVector(cpus=4, memory="16G", gpus=1, gpu_type="a100"),
    )  # fmt: skip
    fields.update(changes)
    return LaunchRequest(**fields)


def header(text: str) -> list[str]:
    """header is the script's #SBATCH lines."""
    return [line for line in text.splitlines() if line.startswith("#SBATCH")]


# --- naming ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("cluster", "name"), [("dev2", "b-a100n1"), ("c_1", "ms-hold-x"), ("X", "123_4")])
def test_qualified_names_round_trip(cluster: str, name: str) -> None:
    text = qualify(cluster, name)
    assert text == f"{cluster}/{name}" and split_qualified(text) == (cluster, name)


def test_unqualified_names_and_job_refs() -> None:
    assert qualify("", "a100n1") == "a100n1" and split_qualified("a100n1") == ("", "a100n1")
    assert (
        job_ref(123) == "123"
        and job_ref(123, "dev2") == "dev2/123"
        and job_ref("123_4", "dev2") == "dev2/123_4"
    )
    assert split_qualified(job_ref(77, "dev2")) == ("dev2", "77")


@pytest.mark.parametrize("name", ["", "dev/2", "dev 2", "dév2", "x" * 65, "dev2\n"])
def test_bad_cluster_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="cluster name"):
        ClusterAccess(name)
    with pytest.raises(ValueError, match="cluster name"):
        ClusterSet({name: FakeSlurm()})


def test_longest_cluster_name_is_accepted_and_its_job_refs_fit_the_store() -> None:
    assert ClusterAccess("x" * 20, "/etc/slurm/x.conf").name == "x" * 20
    assert len(job_ref(4_294_967_295, "x" * 20)) <= 32  # attempts.slurm_job_id is String(32)
    with pytest.raises(ValueError):
        ClusterAccess("x" * 21)


def test_cluster_client_runs_its_commands_with_the_clusters_slurm_conf() -> None:
    env = {"PATH": os.environ["PATH"], "SLURM_CONF": "/etc/slurm/slurm.conf", "SQUEUE_FORMAT": "%i"}
    timeouts = Timeouts(read=5.0)
    client = cluster_client(ClusterAccess("dev2", "/etc/slurm-dev2/slurm.conf"), timeouts, env)
    seen = client.runner.run("env", []).stdout.splitlines()  # what a Slurm CLI would get
    assert "SLURM_CONF=/etc/slurm-dev2/slurm.conf" in seen
    assert not any(line.startswith("SQUEUE_FORMAT=") for line in seen)
    assert client.timeouts is timeouts
    # without a file of its own the cluster is the environment's
    assert (
        cluster_client(ClusterAccess("dev1"), runner_env=env).runner.env["SLURM_CONF"]
        == "/etc/slurm/slurm.conf"
    )


def test_cluster_set_implements_the_whole_protocol() -> None:
    methods = [
        name for name, _ in inspect.getmembers(SlurmClient, inspect.isfunction) if not name.startswith("_")
    ]
    assert "submit" in methods and "sdiag" in methods
    for name in methods:
        ours = inspect.signature(getattr(ClusterSet, name)).parameters
        assert list(ours) == list(inspect.signature(getattr(SlurmClient, name)).parameters), name


def test_clusters_and_their_clients(site: ClusterSet, dev2: FakeCluster) -> None:
    assert site.clusters == ("dev1", "dev2") and site.client("dev2") is dev2
    with pytest.raises(ValueError, match="dev3"):
        site.client("dev3")
    with pytest.raises(ValueError, match="at least one"):
        ClusterSet({})


# --- node reads ----------------------------------------------------------------------------------


def test_sinfo_qualifies_every_clusters_nodes(site: ClusterSet, dev2: FakeCluster) -> None:
    dev2.set_node("gpu1", "IDLE", ["DRAIN"])
    nodes = {node.name: node for node in site.sinfo()}
    assert set(nodes) == {
        "dev1/a100n1",
        "dev1/a100n2",
        "dev1/gpu1",
        "dev2/b-a100n1",
        "dev2/b-a100n2",
        "dev2/gpu1",
    }
    # the same bare name on two clusters is two nodes, each with its own state
    assert nodes["dev2/gpu1"].condition.drained and not nodes["dev1/gpu1"].condition.drained
    assert nodes["dev1/a100n1"].gres == dev2.nodes["b-a100n1"].gres  # only the name changes


def test_show_nodes_qualifies_names(site: ClusterSet) -> None:
    names = [node.name for node in site.show_nodes()]
    assert names == ["dev1/a100n1", "dev1/a100n2", "dev1/gpu1", "dev2/b-a100n1", "dev2/b-a100n2", "dev2/gpu1"]


def test_topology_qualifies_switches_and_their_nodes(
    site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster
) -> None:
    for fake, nodes in ((dev1, ("a100n1", "gpu1")), (dev2, ("b-a100n1", "gpu1"))):
        fake.switches = {"leaf": Switch("leaf", 0, nodes), "top": Switch("top", 1, (), ("leaf",))}
    switches = site.topology()
    assert set(switches) == {"dev1/leaf", "dev1/top", "dev2/leaf", "dev2/top"}
    assert switches["dev2/top"].switches == ("dev2/leaf",) and switches["dev2/leaf"].name == "dev2/leaf"
    leaf = leaf_of_node(switches)
    assert leaf["dev1/gpu1"] == "dev1/leaf" and leaf["dev2/gpu1"] == "dev2/leaf"


# --- job reads -----------------------------------------------------------------------------------


def test_squeue_carries_the_cluster_and_qualified_nodes(
    site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster
) -> None:
    dev1.add_job("one", nodes=("gpu1",))
    dev2.add_job("two", nodes=("b-a100n1", "b-a100n2"))
    dev2.add_job("waits", state="PENDING", nodes=("gpu1",))
    jobs = {job.name: job for job in site.squeue()}
    one, two, waits = jobs["one"], jobs["two"], jobs["waits"]
    assert (one.cluster, one.job_id, one.nodes, one.nodelist) == ("dev1", 1000, ("dev1/gpu1",), "dev1/gpu1")
    assert (two.cluster, two.job_id, two.nodes) == ("dev2", 1000, ("dev2/b-a100n1", "dev2/b-a100n2"))
    assert two.nodelist == "dev2/b-a100n1,dev2/b-a100n2" and tuple(hostlist.expand(two.nodelist)) == two.nodes
    assert (waits.cluster, waits.nodes, waits.nodelist) == ("dev2", (), "")
    assert {job_ref(job.job_id, job.cluster) for job in jobs.values()} == {
        "dev1/1000",
        "dev2/1000",
        "dev2/1001",
    }


def test_squeue_reservations_are_qualified(site: ClusterSet, dev2: FakeCluster) -> None:
    dev2.add_job("held", nodes=("gpu1",))
    original = dev2.squeue

    def with_reservation() -> list:
        return [replace(job, reservation="ms-hold-t") for job in original()]

    dev2.squeue = with_reservation  # type: ignore[method-assign]
    (job,) = site.squeue()
    assert job.reservation == "dev2/ms-hold-t"


def test_a_single_cluster_read_has_no_cluster(dev1: FakeCluster) -> None:
    dev1.add_job("one", nodes=("gpu1",))
    (job,) = dev1.squeue()
    assert job.cluster == "" and job.nodes == ("gpu1",)


def test_sacct_carries_the_cluster_and_qualified_nodes(
    site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster
) -> None:
    dev1.add_job("one", nodes=("a100n1",))
    dev2.add_job("two", nodes=("gpu1",))
    records = {(record.cluster, record.job_id): record for record in site.sacct(SINCE)}
    assert set(records) == {
        ("dev1", "1000"),
        ("dev1", "1000.batch"),
        ("dev2", "1000"),
        ("dev2", "1000.batch"),
    }
    assert records["dev1", "1000"].nodes == ("dev1/a100n1",)
    assert records["dev2", "1000"].nodes == ("dev2/gpu1",)
    assert records["dev2", "1000"].base_job_id == 1000  # ids stay as Slurm wrote them


def test_show_jobs_carries_the_cluster_and_qualified_nodes(site: ClusterSet, dev2: FakeCluster) -> None:
    dev2.add_job("two", nodes=("b-a100n1", "b-a100n2"))
    (job,) = site.show_jobs()
    assert (job.cluster, job.job_id, job.nodes) == ("dev2", 1000, ("dev2/b-a100n1", "dev2/b-a100n2"))
    assert job.reservation == "dev2/hold-1000" and job.raw["NodeList"] == "b-a100n[1-2]"


def test_squeue_json_entries_name_their_cluster(
    site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster
) -> None:
    dev1.add_job("one", nodes=("gpu1",))
    dev2.add_job("two", nodes=("gpu1",))
    assert site.squeue_json() == [
        {"job_id": 1000, "nodes": "gpu1", "cluster": "dev1"},
        {"job_id": 1000, "nodes": "gpu1", "cluster": "dev2"},
    ]


def test_a_dark_cluster_leaves_out_its_jobs_and_keeps_its_last_nodes(dev1: FakeCluster, dev2: FakeCluster) -> None:
    # a bulkhead: dev2's controller not answering must not blind the set to dev1
    site = ClusterSet({"dev1": dev1, "dev2": dev2}, background=False)
    dev1.add_job("one", nodes=("gpu1",))
    dev2.add_job("two", nodes=("gpu1",))
    assert {node.name for node in site.sinfo()} >= {"dev2/b-a100n1"}  # remembered while dev2 answers
    dev2.squeue_fault = SlurmTransient("slurmctld not responding", command="squeue")
    assert [job.cluster for job in site.squeue()] == ["dev1"]  # dev2's jobs are not "gone", just unread
    assert set(site.unreachable()) == {"dev2"}
    dev2.nodes.clear()  # not asked while dark: the nodes come from its last answer
    assert {node.name for node in site.sinfo()} >= {"dev2/b-a100n1", "dev1/a100n1"}
    with pytest.raises(SlurmTransient, match="cluster dev2 is unreachable"):
        site.cancel(["dev2/1000"])  # a write to a dark cluster fails at once, nothing sent
    dev2.squeue_fault = None
    site.probe_dark()  # its controller answers the probe: read again from the next call on
    assert sorted(job.cluster for job in site.squeue()) == ["dev1", "dev2"]
    assert site.unreachable() == {}


def test_a_dark_cluster_is_asked_by_the_probe_only(dev1: FakeCluster, dev2: FakeCluster) -> None:
    site = ClusterSet({"dev1": dev1, "dev2": dev2}, background=False)
    asked: list[str] = []

    def down() -> list:
        asked.append("squeue")
        raise SlurmTransient("down", command="squeue")

    def probe_fails() -> Sdiag:
        asked.append("sdiag")
        raise SlurmTransient("down", command="sdiag")

    dev2.squeue = down  # type: ignore[method-assign]
    dev2.sdiag = probe_fails  # type: ignore[method-assign]
    for _ in range(5):
        site.squeue()
    site.probe_dark()
    site.squeue()
    assert asked == ["squeue", "sdiag"]  # each failed read costs Slurm's connect retries: once, not per period
    assert set(site.unreachable()) == {"dev2"}


def test_the_prober_brings_a_dark_cluster_back_by_itself(dev1: FakeCluster, dev2: FakeCluster) -> None:
    site = ClusterSet({"dev1": dev1, "dev2": dev2}, probe_every_s=0.05)
    dev2.squeue_fault = SlurmTransient("down", command="squeue")
    site.squeue()
    assert set(site.unreachable()) == {"dev2"}
    deadline = time.monotonic() + 5
    while site.unreachable() and time.monotonic() < deadline:
        time.sleep(0.02)
    site.close()
    assert site.unreachable() == {}  # FakeCluster's sdiag answers


def test_every_cluster_failing_fails_the_read(site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster) -> None:
    dev1.squeue_fault = SlurmTransient("down", command="squeue")
    dev2.squeue_fault = SlurmTransient("down", command="squeue")
    with pytest.raises(SlurmTransient):
        site.squeue()


def test_unreachable_clusters_of_a_single_clusters_client_is_empty(dev1: FakeCluster) -> None:
    assert unreachable_clusters(dev1) == {}


# --- submit ----------------------------------------------------------------------------------------


def test_submit_routes_a_rendered_script_by_its_nodelist(
    site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster
) -> None:
    dev1.add_job("first on dev1", nodes=("gpu1",))  # dev1 also has a job 1000: the ref tells them apart
    rendered = render(
        launch_request(num_nodes=2, nodes=("dev2/b-a100n2", "dev2/b-a100n1"), reservation="dev2/ms-hold-t")
    )
    assert "#SBATCH --nodelist=dev2/b-a100n[1-2]" in header(rendered)  # what render writes
    ref = site.submit(rendered)
    assert ref == "dev2/1000" and dev1.submitted_scripts == []
    (sent,) = dev2.submitted_scripts
    assert {"#SBATCH --nodelist=b-a100n[1-2]", "#SBATCH --reservation=ms-hold-t"} <= set(header(sent))
    assert "dev2/" not in sent
    expected = rendered.replace("--nodelist=dev2/b-a100n[1-2]", "--nodelist=b-a100n[1-2]")
    assert sent == expected.replace("--reservation=dev2/ms-hold-t", "--reservation=ms-hold-t")
    assert dev2.jobs[1000].nodes == ("b-a100n1", "b-a100n2")


def test_submit_rewrites_every_het_component(site: ClusterSet, dev1: FakeCluster) -> None:
    roles = (
        Role(name="a", per_node=ResourceVector(cpus=1), command="a", nodes=("dev1/a100n1",)),
        Role(
            name="b",
            per_node=ResourceVector(cpus=1),
            command="b",
            num_nodes=2,
            nodes=("dev1/gpu1", "dev1/a100n2"),
        ),
    )
    ref = site.submit(render(launch_request(command="", roles=roles)))
    assert ref == "dev1/1000"
    assert [line for line in header(dev1.submitted_scripts[0]) if "nodelist" in line] == [
        "#SBATCH --nodelist=a100n1",
        "#SBATCH --nodelist=a100n2,gpu1",
    ]
    assert dev1.jobs[1000].components == [("a100n1",), ("a100n2", "gpu1")]


def test_submit_accepts_a_comma_list_and_a_bare_reservation(site: ClusterSet, dev2: FakeCluster) -> None:
    ref = site.submit(script("dev2/b-a100n1,dev2/gpu1", reservation="mine"))
    assert ref == "dev2/1000"
    assert header(dev2.submitted_scripts[0])[1:] == [
        "#SBATCH --reservation=mine",
        "#SBATCH --nodelist=b-a100n1,gpu1",
    ]


def test_submit_reads_options_only_before_the_first_command(site: ClusterSet, dev2: FakeCluster) -> None:
    # a user's command may hold "#SBATCH" text; sbatch ignores it, and so does the routing
    body = "exec bash -c 'x\n#SBATCH --nodelist=dev1/gpu1\n'\n"
    assert site.submit(script("dev2/gpu1", body=body)) == "dev2/1000"
    assert dev2.submitted_scripts[0].endswith(body)


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        (script("dev1/a100n1,dev2/b-a100n1"), "several clusters"),
        (script("dev1/a100n1", "dev2/b-a100n1"), "several clusters"),
        (script("a100n1"), "'a100n1'"),
        (script("dev1/a100n1,gpu1"), "'gpu1'"),
        (script("dev3/x[1-2]"), "'dev3/x1'"),
        ("#!/bin/bash\n#SBATCH --job-name=x\nexec true\n", "no nodes"),
        (script("dev2/gpu1", reservation="dev1/ms-hold-t"), "not on cluster 'dev2'"),
    ],
)
def test_submit_refuses_scripts_without_one_known_cluster(
    site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster, text: str, refusal: str
) -> None:
    # a refusal (never looked up as an unknown outcome): nothing was sent to either cluster
    with pytest.raises(SlurmRejected, match=refusal):
        site.submit(text)
    assert dev1.submitted_scripts == dev2.submitted_scripts == []


# --- cancel, release, comment --------------------------------------------------------------------------


def test_cancel_sends_one_scancel_per_cluster(site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster) -> None:
    for fake in (dev1, dev2):
        fake.add_job("a", nodes=("gpu1",))
        fake.add_job("b", nodes=("gpu1",))
    site.cancel(["dev2/1000", "dev1/1001", "dev2/1001"])
    assert dev1.calls["cancel"] == 1 and dev2.calls["cancel"] == 1
    assert dev1.cancels == [("1001", None)] and dev2.cancels == [("1000", None), ("1001", None)]
    assert (dev1.jobs[1000].state, dev1.jobs[1001].state) == ("RUNNING", "CANCELLED")
    assert dev2.jobs[1000].state == dev2.jobs[1001].state == "CANCELLED"


def test_cancel_passes_the_signal(site: ClusterSet, dev2: FakeCluster) -> None:
    dev2.add_job("a", nodes=("gpu1",))
    site.cancel(["dev2/1000"], signal="USR1")
    assert dev2.jobs[1000].signals == ["USR1"] and dev2.jobs[1000].state == "RUNNING"


@pytest.mark.parametrize("bad", [1000, "1000", "dev3/1000", "/1000"])
def test_cancel_refuses_ids_without_a_known_cluster(
    site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster, bad: int | str
) -> None:
    with pytest.raises(ValueError, match=f"'{bad}'"):
        site.cancel(["dev2/1000", bad])
    assert dev1.calls["cancel"] == dev2.calls["cancel"] == 0  # checked before anything is sent


def test_a_failed_cancel_does_not_hold_up_the_other_cluster(
    site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster
) -> None:
    dev2.add_job("a", nodes=("gpu1",))
    dev1.cancel_fault = SlurmTransient("slurmctld not responding", command="scancel")
    with pytest.raises(SlurmTransient):
        site.cancel(["dev1/1000", "dev2/1000"])
    assert dev2.jobs[1000].state == "CANCELLED"


def test_release_held_and_set_comment_route_by_the_job(
    site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster
) -> None:
    site.release_held("dev2/1000", ["dev2/b-a100n1", "dev2/gpu1"], "tag")
    site.set_comment("dev1/7", "note")
    assert dev2.released == [("1000", ("b-a100n1", "gpu1"), "tag")] and dev1.released == []
    assert dev1.comments == [("7", "note")] and dev2.comments == []


@pytest.mark.parametrize("nodes", [["dev1/gpu1"], ["dev2/gpu1", "dev1/gpu1"], ["gpu1"]])
def test_release_held_refuses_nodes_of_another_cluster(
    site: ClusterSet, dev2: FakeCluster, nodes: list[str]
) -> None:
    with pytest.raises(ValueError):
        site.release_held("dev2/1000", nodes, "tag")
    assert dev2.released == []


# --- reservations ------------------------------------------------------------------------------------


def test_reservations_are_created_updated_and_deleted_on_their_nodes_cluster(
    site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster
) -> None:
    spec = ReservationSpec("ms-hold-t", ("dev2/b-a100n1", "dev2/b-a100n2"), 600)
    assert site.create_reservation(spec) == "dev2/ms-hold-t"
    assert dev1.slurm_reservations == {}
    assert dev2.slurm_reservations["ms-hold-t"].nodes == ("b-a100n1", "b-a100n2")
    (listed,) = site.reservations()
    assert (listed.name, listed.nodes) == ("dev2/ms-hold-t", ("dev2/b-a100n1", "dev2/b-a100n2"))
    # the name as reservations() shows it is accepted too
    site.update_reservation(replace(spec, name="dev2/ms-hold-t", nodes=("dev2/gpu1",)), move_start=False)
    assert dev2.slurm_reservations["ms-hold-t"].nodes == ("gpu1",)
    site.delete_reservation("dev2/ms-hold-t")
    assert dev2.slurm_reservations == {} and site.reservations() == []


def test_the_same_reservation_name_on_two_clusters_is_two_reservations(site: ClusterSet) -> None:
    site.create_reservation(ReservationSpec("ms-hold-t", ("dev1/gpu1",), 600))
    site.create_reservation(ReservationSpec("ms-hold-t", ("dev2/gpu1",), 600))
    assert {(r.name, r.nodes) for r in site.reservations()} == {
        ("dev1/ms-hold-t", ("dev1/gpu1",)),
        ("dev2/ms-hold-t", ("dev2/gpu1",)),
    }
    site.delete_reservation("dev1/ms-hold-t")
    assert [r.name for r in site.reservations()] == ["dev2/ms-hold-t"]


@pytest.mark.parametrize(
    ("spec", "refusal"),
    [
        (ReservationSpec("ms-hold-t", ("dev1/gpu1", "dev2/gpu1"), 600), "several clusters"),
        (ReservationSpec("ms-hold-t", ("gpu1",), 600), "'gpu1'"),
        (ReservationSpec("dev1/ms-hold-t", ("dev2/gpu1",), 600), "not on cluster 'dev2'"),
    ],
)
def test_reservations_on_no_single_cluster_are_refused(
    site: ClusterSet, dev1: FakeCluster, dev2: FakeCluster, spec: ReservationSpec, refusal: str
) -> None:
    with pytest.raises(ValueError, match=refusal):
        site.create_reservation(spec)
    with pytest.raises(ValueError, match=refusal):
        site.update_reservation(spec)
    assert dev1.slurm_reservations == dev2.slurm_reservations == {}


@pytest.mark.parametrize("name", ["ms-hold-t", "dev3/ms-hold-t"])
def test_delete_reservation_needs_a_known_cluster(site: ClusterSet, dev2: FakeCluster, name: str) -> None:
    site.create_reservation(ReservationSpec("ms-hold-t", ("dev2/gpu1",), 600))
    with pytest.raises(ValueError, match=name):
        site.delete_reservation(name)
    assert list(dev2.slurm_reservations) == ["ms-hold-t"]


# --- global reads ----------------------------------------------------------------------------------


def test_global_reads_come_from_the_first_cluster(dev1: FakeCluster, dev2: FakeCluster) -> None:
    site = ClusterSet({"dev2": dev2, "dev1": dev1})  # dev2 first: it is the home cluster
    dev1.qos, dev2.qos = ["one"], ["two"]
    dev2.add_user("alice", ["tenant-a"])
    dev2.set_account("tenant-a", fairshare=5)
    assert site.clusters == ("dev2", "dev1")
    assert site.qos_names() == ["two"] and site.slurm_config().cluster_name == "dev2"
    assert [user.user for user in site.user_associations("alice")] == ["alice"]
    assert [account.account for account in site.account_shares()] == ["tenant-a"]
    assert site.sdiag().server_thread_count == 2
    assert dev1.calls["user_associations"] == dev1.calls["account_shares"] == 0

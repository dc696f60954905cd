"""-M/--clusters in msbatch, msqueue and mscancel on a site of several Slurm clusters (issue 26)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.sbatch import mscancel as mscancel_module
from cli.sbatch.msbatch import main as msbatch
from cli.sbatch.msbatch import prepare
from cli.sbatch.mscancel import main as mscancel
from cli.sbatch.msqueue import main as msqueue
from cli.sbatch.options import SbatchError, parse_command_line
from cli.sbatch.squeue_format import render_line
from cli.sbatch.squeue_long_format import parse_long_format
from meta.service.api import Service
from meta.store.models import Task
from tenants.identity import member
from tests.api_support import RunningApi
from tests.cli.test_msqueue_mscancel import ALICE, BOB, USERS, _job, _running
from tests.runtime.support import training

CWD = "/home/alice/proj"
HEADER = "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
CLUSTER_VARIABLES = ("SBATCH_CLUSTERS", "SLURM_CLUSTERS")

# --- msbatch: parsing and translation ---------------------------------------------------------


def _sbatch(
    tmp_path: Path, directives: list[str], *argv: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """_sbatch translates ``msbatch ARGV job.sh`` (with ``directives``) and returns the validated spec's sbatch section."""
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH -A t\n" + "".join(f"#SBATCH {d}\n" for d in directives) + "true\n"
    )
    spec = prepare(parse_command_line([*argv, str(script)]), env or {}, CWD).translation.spec
    assert spec is not None
    return spec.model_dump(mode="json")["sbatch"] or {}


def _refusal(tmp_path: Path, directives: list[str], *argv: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(SbatchError) as caught:
        _sbatch(tmp_path, directives, *argv, env=env)
    return "\n".join(caught.value.problems)


@pytest.mark.parametrize(
    ("directives", "argv", "env", "want"),
    [
        pytest.param([], ["-M", "dev2"], {}, ["dev2"], id="short"),
        pytest.param([], ["-Mdev2"], {}, ["dev2"], id="short-attached"),
        pytest.param([], ["--clusters=dev2,dev1"], {}, ["dev1", "dev2"], id="long-list"),
        pytest.param([], ["--cluster", "dev2"], {}, ["dev2"], id="sbatch-alias-cluster"),
        pytest.param([], ["--clusters=dev2,dev2"], {}, ["dev2"], id="repeats-once"),
        pytest.param(["-M dev1"], [], {}, ["dev1"], id="directive"),
        pytest.param(["--clusters=dev1"], [], {"SBATCH_CLUSTERS": "dev2"}, ["dev2"], id="env-over-directive"),
        pytest.param([], ["-M", "dev1"], {"SBATCH_CLUSTERS": "dev2"}, ["dev1"], id="command-line-over-env"),
        pytest.param(
            [], [], {"SBATCH_CLUSTERS": "dev1", "SLURM_CLUSTERS": "dev2"}, ["dev2"], id="slurm-clusters-wins"
        ),
        pytest.param([], ["-M", "all"], {}, [], id="all-is-any"),
        pytest.param([], ["-M", "ALL"], {}, [], id="all-any-case"),
        pytest.param(["-M dev1"], ["--clusters="], {}, [], id="empty-resets-to-any"),
        pytest.param([], [], {}, [], id="none"),
    ],
)
def test_clusters_from_every_source(
    tmp_path: Path, directives: list[str], argv: list[str], env: dict[str, str], want: list[str]
) -> None:
    assert _sbatch(tmp_path, directives, *argv, env=env).get("clusters", []) == want


@pytest.mark.parametrize(
    ("directives", "argv", "want_message"),
    [
        pytest.param(
            [],
            ["-M", "dev/2"],
            "invalid --clusters=dev/2 (on the command line): not a cluster name",
            id="slash",
        ),
        pytest.param(
            ["-M x.y"], [], "invalid --clusters=x.y (in #SBATCH line 3): not a cluster name", id="directive"
        ),
        pytest.param([], ["-M", "a" * 65], "not a cluster name", id="too-long"),
        pytest.param([], ["-M", "dev1,all"], "'all' stands alone", id="all-in-a-list"),
        pytest.param([], ["-M", "dev1,,dev2"], "an empty cluster name", id="empty-item"),
        pytest.param([], ["--clu=dev1"], "ambiguous option --clu", id="ambiguous-prefix"),
    ],
)
def test_bad_cluster_values_are_refused_naming_the_option(
    tmp_path: Path, directives: list[str], argv: list[str], want_message: str
) -> None:
    assert want_message in _refusal(tmp_path, directives, *argv)


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        pytest.param(["-M", "dev2", "-w", "b-a100n[1-2]", "-x", "t4n1"],
                     {"clusters": ["dev2"], "nodelist": ["dev2/b-a100n1", "dev2/b-a100n2"], "exclude": ["dev2/t4n1"]},
                     id="one-cluster-qualifies-bare-names"),
        pytest.param(["-M", "dev2", "-w", "dev2/b-a100n1"], {"clusters": ["dev2"], "nodelist": ["dev2/b-a100n1"]},
                     id="qualified-stays"),
        pytest.param(["-M", "dev1,dev2", "-x", "n1"], {"clusters": ["dev1", "dev2"], "exclude": ["dev1/n1", "dev2/n1"]},
                     id="several-exclude-on-each"),
        pytest.param(["-M", "dev1,dev2", "-w", "dev2/n[1-2]"],
                     {"clusters": ["dev1", "dev2"], "nodelist": ["dev2/n1", "dev2/n2"]}, id="several-qualified"),
        pytest.param(["-w", "dev2/n[1-2]", "-x", "m1"], {"nodelist": ["dev2/n1", "dev2/n2"], "exclude": ["m1"]},
                     id="no-M-names-as-given"),
        pytest.param(["-M", "dev1", "-x", "dev2/n1"], {"clusters": ["dev1"], "exclude": ["dev2/n1"]},
                     id="exclude-elsewhere-is-harmless"),
    ],
)  # fmt: skip
def test_node_names_are_placed_on_the_clusters(tmp_path: Path, argv: list[str], want: dict[str, Any]) -> None:
    section = _sbatch(tmp_path, [], *argv)
    assert {key: section[key] for key in ("clusters", "nodelist", "exclude") if section.get(key)} == want


def test_one_cluster_nodelist_still_sets_the_node_count(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH -A t -M dev2 -w b-a100n[1-3]\ntrue\n")
    spec = prepare(parse_command_line([str(script)]), {}, CWD).translation.spec
    assert spec is not None and spec.workers_per_task() == 3
    assert spec.sbatch is not None and spec.sbatch.nodelist == (
        "dev2/b-a100n1",
        "dev2/b-a100n2",
        "dev2/b-a100n3",
    )


@pytest.mark.parametrize(
    ("argv", "want_message"),
    [
        pytest.param(["-M", "dev1,dev2", "-w", "b-a100n1"],
                     "invalid --nodelist=b-a100n1 (on the command line): --clusters=dev1,dev2 names several "
                     "clusters; prefix each node with its cluster, e.g. dev1/b-a100n1", id="bare-with-several"),
        pytest.param(["-M", "dev1", "-w", "dev2/b-a100n1"],
                     "invalid --nodelist=dev2/b-a100n1 (on the command line): node dev2/b-a100n1 is on cluster "
                     "dev2, which --clusters=dev1 does not name", id="node-on-another-cluster"),
    ],
)  # fmt: skip
def test_nodelists_that_cannot_be_placed_are_refused(
    tmp_path: Path, argv: list[str], want_message: str
) -> None:
    assert _refusal(tmp_path, [], *argv) == want_message


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """db_url is a fresh SQLite store made the default through METASCHED_DB; no cluster variables."""
    url = f"sqlite:///{tmp_path / 'msbatch.sqlite'}"
    monkeypatch.setenv("METASCHED_DB", url)
    for variable in ("METASCHED_TENANT", "SBATCH_ACCOUNT", *CLUSTER_VARIABLES):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    return url


def _script(tmp_path: Path, *directives: str) -> str:
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH -A nlp\n" + "".join(f"#SBATCH {d}\n" for d in directives) + "true\n"
    )
    return str(script)


def test_msbatch_stores_the_clusters_and_prints_as_before(db_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(msbatch, ["-M", "dev2", "-w", "b-a100n1", _script(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Submitted batch job ") and "cluster" not in result.stdout
    spec = Service.open(db_url).status(result.stdout.split()[-1]).spec
    assert (spec["sbatch"]["clusters"], spec["sbatch"]["nodelist"]) == (["dev2"], ["dev2/b-a100n1"])


def test_msbatch_takes_sbatch_clusters_from_the_environment(db_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(msbatch, ["--parsable", _script(tmp_path)], env={"SBATCH_CLUSTERS": "dev1"})
    assert result.exit_code == 0, result.output
    assert Service.open(db_url).status(result.stdout.strip()).spec["sbatch"]["clusters"] == ["dev1"]


def test_test_only_shows_the_clusters(db_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(msbatch, ["--test-only", _script(tmp_path, "--clusters=dev1,dev2")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sbatch"]["clusters"] == ["dev1", "dev2"]


def test_a_bad_cluster_is_a_usage_error(db_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(msbatch, ["-M", "dev2", "-w", "n1", "-M", "dev/2", _script(tmp_path)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(
        "msbatch: error: invalid --clusters=dev/2 (on the command line): not a cluster name"
    )
    assert len(result.stderr.splitlines()) == 1


def test_msbatch_help_lists_the_option() -> None:
    result = CliRunner().invoke(msbatch, ["--help"])
    assert "-M, --clusters=VALUE" in result.stdout and "SBATCH_CLUSTERS" in result.stdout


# --- msqueue and mscancel on two clusters -----------------------------------------------------

Run = Callable[..., Result]


@pytest.fixture
def run(api: RunningApi, tmp_path: Path) -> Run:
    """run invokes msqueue (or mscancel) as ``uid`` through the API with no cluster variables unless given."""

    def invoke(
        *args: str, uid: int = ALICE, prog: Any = msqueue, env: dict[str, str] | None = None
    ) -> Result:
        cred = tmp_path / f"cred-{uid}"
        cred.write_text(f"uid={uid}\n")
        base: dict[str, str | None] = {"METASCHED_API": api.address, "METASCHED_CREDENTIAL_FILE": str(cred),
                                       "METASCHED_DB": None, "METASCHED_DB_FILE": None, "SLURM_CLUSTERS": None}  # fmt: skip
        result = CliRunner().invoke(prog, list(args), env={**base, **(env or {})})
        assert "Traceback" not in result.output, result.output
        return result

    return invoke


class Site:
    """Site is alice's four jobs on clusters dev1 and dev2: two running, two waiting."""

    def __init__(self, service: Service):
        self.on_dev1, (task_1,) = _job(service, ALICE, "alpha", workers=2)
        self.on_dev2, (task_2,) = _job(service, ALICE, "beta")
        self.for_dev2, _ = _job(service, ALICE, "gamma", sbatch={"clusters": ["dev2"]})
        self.anywhere, _ = _job(service, ALICE, "delta")
        _running(service, task_1, "dev1/41", ("dev1/a100n2", "dev1/a100n1"))
        _running(service, task_2, "dev2/7", ("dev2/b-a100n1",))


@pytest.fixture
def site(service: Service) -> Site:
    return Site(service)


def _ids(result: Result) -> list[str]:
    """_ids are the first words of the output's lines ('' for a blank one)."""
    assert result.exit_code == 0, result.output
    return [(line.split() or [""])[0] for line in result.stdout.splitlines()]


def test_msqueue_prints_each_clusters_jobs_under_its_name(site: Site, run: Run) -> None:
    result = run("-M", "dev1,dev2")
    assert _ids(result) == ["CLUSTER:", "JOBID", site.on_dev1, site.anywhere, "",
                            "CLUSTER:", "JOBID", site.on_dev2, site.for_dev2, site.anywhere]  # fmt: skip
    lines = result.stdout.splitlines()
    assert (lines[0], lines[1], lines[5]) == ("CLUSTER: dev1", HEADER, "CLUSTER: dev2")
    rows = {line.split()[0]: line.split() for line in lines if line.startswith(" ") and "JOBID" not in line}
    assert (
        rows[site.on_dev1][-1] == "a100n[1-2]" and rows[site.on_dev2][-1] == "b-a100n1"
    )  # bare in a section
    assert rows[site.for_dev2][-1] == "(None)"


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(["-M", "dev2"], ["CLUSTER:", "JOBID", "on_dev2", "for_dev2", "anywhere"], id="one"),
        pytest.param(["-M", "dev2,dev1"], ["CLUSTER:", "JOBID", "on_dev2", "for_dev2", "anywhere", "",
                                           "CLUSTER:", "JOBID", "on_dev1", "anywhere"], id="in-the-order-given"),
        pytest.param(["-M", "all"], ["CLUSTER:", "JOBID", "on_dev1", "anywhere", "",
                                     "CLUSTER:", "JOBID", "on_dev2", "for_dev2", "anywhere"], id="all"),
        pytest.param(["-M", "dev3"], ["CLUSTER:", "JOBID", "anywhere"], id="a-cluster-without-jobs"),
        pytest.param(["-h", "-M", "dev2"], ["on_dev2", "for_dev2", "anywhere"], id="noheader-one"),
        pytest.param(["-h", "-M", "dev1,dev2", "-o", "%i"], ["on_dev1", "anywhere", "on_dev2", "for_dev2", "anywhere"],
                     id="noheader-several-own-format"),
        pytest.param([], ["JOBID", "on_dev1", "on_dev2", "for_dev2", "anywhere"], id="no-M-plain"),
    ],
)  # fmt: skip
def test_msqueue_sections(site: Site, run: Run, args: list[str], want: list[str]) -> None:
    names = {getattr(site, name): name for name in ("on_dev1", "on_dev2", "for_dev2", "anywhere")}
    assert [names.get(word, word) for word in _ids(run(*args))] == want


def test_msqueue_noheader_over_several_clusters_puts_the_cluster_first(site: Site, run: Run) -> None:
    lines = run("-h", "-M", "dev1,dev2").stdout.splitlines()
    assert [(line[:11], line.split()[1]) for line in lines] == [
        ("dev1       ", site.on_dev1), ("dev1       ", site.anywhere),
        ("dev2       ", site.on_dev2), ("dev2       ", site.for_dev2), ("dev2       ", site.anywhere),
    ]  # fmt: skip


def test_slurm_clusters_in_the_environment_is_minus_m(site: Site, run: Run) -> None:
    assert _ids(run("-h", env={"SLURM_CLUSTERS": "dev1"})) == [site.on_dev1, site.anywhere]
    assert _ids(run("-h", "-M", "dev2", env={"SLURM_CLUSTERS": "dev1"}))[0] == site.on_dev2  # the option wins


def test_the_cluster_field(site: Site, run: Run) -> None:
    result = run("-O", "JobID:12,Cluster:6,NodeList:")
    assert result.stdout.splitlines() == [
        "JOBID       CLUSTENODELIST",
        f"{site.on_dev1:12}dev1  dev1/a100n[1-2]",
        f"{site.on_dev2:12}dev2  dev2/b-a100n1",
        f"{site.for_dev2:12}dev2",  # waiting, and may run on dev2 only
        site.anywhere,
    ]
    assert render_line(parse_long_format("cluster"), None) == "CLUSTER"
    in_dev2 = run("-h", "-M", "dev2", "-O", "JobID:12,Cluster").stdout.splitlines()
    assert [line.split()[1] for line in in_dev2] == ["dev2", "dev2", "dev2"]


def test_msqueue_json_has_the_cluster_and_the_allowed_clusters(site: Site, run: Run) -> None:
    plain = {row["job_id"]: row for row in json.loads(run("--json").stdout)}
    assert {job: (row["cluster"], row["clusters"]) for job, row in plain.items()} == {
        site.on_dev1: ("dev1", []), site.on_dev2: ("dev2", []), site.for_dev2: ("dev2", ["dev2"]),
        site.anywhere: ("", []),
    }  # fmt: skip
    in_dev1 = json.loads(run("--json", "-M", "dev1").stdout)
    assert [(row["job_id"], row["cluster"], row["nodelist"]) for row in in_dev1] == [
        (site.on_dev1, "dev1", ["a100n1", "a100n2"]), (site.anywhere, "dev1", [])]  # fmt: skip


def test_a_site_of_one_cluster_shows_bare_named_jobs_under_any_cluster(service: Service, run: Run) -> None:
    running, (task,) = _job(service, ALICE, "solo")
    _running(service, task, "12", ("node1",))
    assert _ids(run("-M", "main")) == ["CLUSTER:", "JOBID", running]
    assert _ids(run("-M", "all")) == ["JOBID", running]  # no cluster names to list: squeue's plain view


@pytest.mark.parametrize("prog", [msqueue, mscancel])
def test_a_bad_cluster_name_is_an_error(run: Run, prog: Any) -> None:
    result = run("-M", "dev/1", "j1234567", prog=prog) if prog is mscancel else run("-M", "dev/1")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"{prog.name}: error: invalid --clusters=dev/1: not a cluster name")


def _state(service: Service, short_id: str) -> str:
    return service.status(short_id).state.value


def test_mscancel_refuses_a_job_on_another_cluster(service: Service, site: Site, run: Run) -> None:
    result = run("-M", "dev2", site.on_dev1, site.on_dev2, prog=mscancel)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"mscancel: error: Kill job error on job id {site.on_dev1}: Invalid job id specified"
    ]
    assert (_state(service, site.on_dev1), _state(service, site.on_dev2)) == ("running", "cancelling")
    waiting = run("-M", "dev1", site.for_dev2, site.anywhere, prog=mscancel)  # gamma may run on dev2 only
    assert waiting.exit_code == 1 and f"job id {site.for_dev2}: Invalid job id specified" in waiting.stderr
    assert (_state(service, site.for_dev2), _state(service, site.anywhere)) == ("pending", "cancelled")
    assert run("-M", "all", site.for_dev2, prog=mscancel).exit_code == 0
    assert _state(service, site.for_dev2) == "cancelled"


def test_mscancel_takes_a_slurm_id_on_the_named_cluster(service: Service, site: Site, run: Run) -> None:
    other = run("-M", "dev1", "7", prog=mscancel)  # dev1 has no job 7
    assert other.exit_code == 1 and "Kill job error on job id 7: Invalid job id specified" in other.stderr
    assert run("-M", "dev2", "7", prog=mscancel).exit_code == 0
    assert _state(service, site.on_dev2) == "cancelling" and _state(service, site.on_dev1) == "running"


def test_mscancel_filters_cancel_only_the_named_clusters_jobs(service: Service, site: Site, run: Run) -> None:
    result = run("-M", "dev1", "-u", "alice", prog=mscancel)
    assert (result.exit_code, result.output) == (0, "")
    states = {job: _state(service, job) for job in (site.on_dev1, site.on_dev2, site.for_dev2, site.anywhere)}
    assert states == {site.on_dev1: "cancelling", site.on_dev2: "running", site.for_dev2: "pending",
                      site.anywhere: "cancelled"}  # fmt: skip


def test_mscancel_of_an_array_on_two_clusters_ends_only_the_named_clusters_elements(
    service: Service, run: Run
) -> None:
    user, tenant = USERS[ALICE]
    spec = training("sweep", tenant=tenant, time_limit="2h", array={"indexes": [0, 1, 2]})
    job = service.submit(spec, principal=member(user, ALICE, [tenant])).job
    with service.db.session() as session:
        tasks = {t.name: t.id for t in session.query(Task).filter(Task.job_id == job.id)}
    _running(service, tasks["0"], "dev1/50", ("dev1/a100n1",))
    _running(service, tasks["1"], "dev2/51", ("dev2/b-a100n1",))
    assert run("-M", "dev1", job.short_id, prog=mscancel).exit_code == 0
    with service.db.session() as session:
        states = {name: session.get(Task, task_id).state for name, task_id in tasks.items()}
        stopping = {
            name: [a.state for a in session.get(Task, task_id).attempts] for name, task_id in tasks.items()
        }
    assert states["2"] == "cancelled" and states["1"] == "running"  # the waiting element may run on dev1
    assert stopping["0"] == ["stopping"] and stopping["1"] == ["running"]


def test_mscancel_signals_each_clusters_slurm_jobs_there(
    site: Site, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def fake_run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(mscancel_module.subprocess, "run", fake_run)
    assert run("--signal", "USR1", site.on_dev2, prog=mscancel).exit_code == 0
    assert calls == [["scancel", "--clusters=dev2", "--signal=USR1", "7"]]


def test_other_users_jobs_stay_invisible_with_clusters(service: Service, site: Site, run: Run) -> None:
    bobs, (task,) = _job(service, BOB, "bobs")
    _running(service, task, "dev1/99", ("dev1/a100n3",))
    assert bobs not in _ids(run("-M", "dev1"))
    assert bobs in _ids(run("-h", "-M", "dev1", uid=BOB))

"""deploy/devcluster's second cluster (issue 26): its configs are the first's, changed only where they must be.

``render_second`` is pure: it turns the files of deploy/slurm/ into dev2's. These tests read the
real files, so a setting added to deploy/slurm/slurm.conf that the second cluster could not share
(a path in the first's dirs, a port) fails here rather than on a live host.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load_devcluster() -> ModuleType:
    """Import deploy/devcluster (a script without .py) as a module; its main() does not run."""
    loader = importlib.machinery.SourceFileLoader("devcluster_script", str(REPO / "deploy" / "devcluster"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # dataclasses look their module up while the class is built
    loader.exec_module(module)
    return module


dc = _load_devcluster()
SOURCES = {name: (dc.CONF_SRC / name).read_text() for name in dc.SECOND_FILES}
RENDERED = dc.render_second(SOURCES)
HEADER_LINES = 3
# The settings of slurm.conf that must differ between two clusters on one host and one slurmdbd.
MUST_DIFFER = {
    "ClusterName", "SlurmctldPort", "SlurmdPort", "StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile",
    "SlurmdPidFile", "SlurmctldLogFile", "SlurmdLogFile", "NodeName", "NodeHostname", "Port", "Nodes",
}  # fmt: skip
TOKEN = re.compile(r"(?<!\S)([A-Za-z]+)=(\S+)")


def _settings(text: str) -> dict[str, str]:
    """Map the first key=value of each (non-comment) line to its value: slurm.conf's global settings."""
    found = {}
    for line in text.splitlines():
        m = TOKEN.match(line.strip())
        if m and not line.lstrip().startswith("#") and not line.startswith(("NodeName", "PartitionName")):
            found[m[1]] = m[2]
    return found


def test_the_second_slurm_conf_differs_from_the_first_only_where_it_must() -> None:
    first = SOURCES["slurm.conf"].splitlines()
    second = RENDERED["slurm.conf"].splitlines()
    assert all(line.startswith("#") for line in second[:HEADER_LINES])
    assert len(second) - HEADER_LINES == len(first)
    changed: set[str] = set()
    for a, b in zip(first, second[HEADER_LINES:], strict=True):
        if a == b:
            continue
        tokens_a, tokens_b = TOKEN.findall(a), TOKEN.findall(b)
        assert [k for k, _ in tokens_a] == [k for k, _ in tokens_b], (a, b)  # same settings, same order
        changed |= {ka for (ka, va), (_, vb) in zip(tokens_a, tokens_b, strict=True) if va != vb}
    assert changed == MUST_DIFFER


def test_the_second_cluster_has_its_own_name_ports_and_dirs_and_the_same_slurmdbd() -> None:
    first, second = _settings(SOURCES["slurm.conf"]), _settings(RENDERED["slurm.conf"])
    assert second["ClusterName"] == "dev2" != first["ClusterName"]
    assert (second["SlurmctldPort"], second["SlurmdPort"]) == ("6827", "6828")
    for key in ("AccountingStorageHost", "AccountingStoragePort", "SlurmctldHost", "AuthType", "FirstJobId"):
        assert second[key] == first[key], key
    assert second["StateSaveLocation"] == "/var/spool/slurmctld-dev2"
    assert second["SlurmdSpoolDir"] == "/var/spool/slurmd-dev2/%n"
    assert second["SlurmctldPidFile"] == "/run/slurm-dev2/slurmctld.pid"
    assert second["SlurmdLogFile"] == "/var/log/slurm-dev2/slurmd-%n.log"
    for key in ("StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile",
                "SlurmdLogFile"):  # fmt: skip
        assert second[key] != first[key], key


def _nodes(text: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^NodeName=(\S+) .*\bPort=(\d+)", text, re.MULTILINE)}


def test_the_second_clusters_nodes_are_renamed_and_listen_on_ports_the_first_does_not_use() -> None:
    first, second = _nodes(SOURCES["slurm.conf"]), _nodes(RENDERED["slurm.conf"])
    assert second == {f"b-{name}": port + 10 for name, port in first.items()}
    assert sorted(second.values()) == list(range(6831, 6837))
    first_ports = set(first.values()) | {6817, 6818, 6819}  # slurmctld, SlurmdPort, slurmdbd
    assert not first_ports & (set(second.values()) | {6827, 6828})
    assert dc.node_names(dc.SECOND) == [f"b-{name}" for name in dc.node_names()]
    assert "PartitionName=managed Nodes=b-t4n[1-2] " in RENDERED["slurm.conf"]
    assert "PartitionName=gpu  Nodes=ALL " in RENDERED["slurm.conf"]


def test_gres_and_topology_name_the_renamed_nodes_and_the_rest_is_copied() -> None:
    gres = RENDERED["gres.conf"]
    assert "NodeName=b-a100n[1-2] Name=gpu Type=a100 File=/dev/fakegpu/nvidia[0-7]" in gres  # same fake GPUs
    assert "SwitchName=leaf1 Nodes=b-a100n[1-2],b-t4n1" in RENDERED["topology.conf"]
    assert RENDERED["cgroup.conf"].splitlines()[HEADER_LINES:] == SOURCES["cgroup.conf"].splitlines()
    assert RENDERED["job_submit.lua"] == SOURCES["job_submit.lua"]


def test_hostlists_are_renamed_item_by_item() -> None:
    assert dc._split_hostlist("a100n[1,3-4],t4n1") == ["a100n[1,3-4]", "t4n1"]
    out = dc.render_second({"x.conf": "PartitionName=p Nodes=a[1,2],b1 Default=YES\nNodeName=DEFAULT CPUs=2\n"})
    assert out["x.conf"].splitlines()[HEADER_LINES:] == [
        "PartitionName=p Nodes=b-a[1,2],b-b1 Default=YES",
        "NodeName=DEFAULT CPUs=2",
    ]


@pytest.mark.parametrize(
    "setting",
    ["JobCompLoc=/var/log/slurm/jobcomp.log", "SlurmSchedLogFile=/var/log/slurm/sched.log",
     "JobCheckpointDir=/var/spool/slurmctld/ckpt"],
)  # fmt: skip
def test_a_new_setting_in_the_first_clusters_dirs_is_refused_not_shared(setting: str) -> None:
    with pytest.raises(dc.DeployError, match="first cluster's"):
        dc.render_second({"slurm.conf": SOURCES["slurm.conf"] + setting + "\n"})

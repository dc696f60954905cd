"""``metasched explain JOB`` on a site of two Slurm clusters (issue 26): the ``clusters:`` block and ``--json``.

The API on a socket (SQLite and PostgreSQL) over a store holding a two-cluster inventory: emu
with two A100 nodes, dev2 with two H100 nodes (names qualified ``cluster/node``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.explain_cmd import _tasks
from cli.main import cli
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.service.api import Service
from meta.store.inventory import save_inventory
from tests.api_support import RunningApi, client_env
from tests.runtime.support import inference, training


def _explain(api: RunningApi, folder: Path, *args: str) -> Result:
    result = CliRunner().invoke(cli, ["explain", *args], env=client_env(api.address, folder, 0), prog_name="metasched")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    return result


def _store_two_clusters(service: Service) -> None:
    a100 = ResourceVector(cpus=64, memory_mib=512 * 1024, gpus=8, gpu_type="a100")
    h100 = ResourceVector(cpus=64, memory_mib=512 * 1024, gpus=4, gpu_type="h100")
    nodes = [NodeState(f"emu/a100n{i}", a100, ("gpu",)) for i in (1, 2)]
    nodes += [NodeState(f"dev2/h100n{i}", h100, ("gpu",)) for i in (1, 2)]
    with service.db.session() as session:
        save_inventory(session, nodes, version=1, switch_parent={})


def test_explain_prints_one_verdict_per_cluster(service: Service, api: RunningApi, tmp_path: Path) -> None:
    _store_two_clusters(service)
    job = service.submit(training("h100", resources={"cpus": 8, "memory": "64G", "gpus": 4, "gpu_type": "h100"}))
    out = _explain(api, tmp_path, job.job.short_id).stdout.splitlines()
    block = out[out.index("clusters:"):]
    assert block == [
        "clusters:",
        "  dev2  fits        fits: 2 nodes for a worker of 4 h100 GPUs, 8 cpus, 64G memory can host it",
        "  emu   never_fits  no node has h100 GPUs (types here: a100)",
    ]


def test_tasks_that_share_a_block_print_it_once_and_json_lists_it_per_task(
    service: Service, api: RunningApi, tmp_path: Path
) -> None:
    _store_two_clusters(service)
    job = service.submit(inference(str(tmp_path / "out"), partitions=3, sbatch={"clusters": ["dev2"]})).job.short_id
    text = _explain(api, tmp_path, job).stdout
    assert text.count("clusters:") == 1 and "  emu   not_listed  not in the job's --clusters (dev2)" in text
    body = json.loads(_explain(api, tmp_path, job, "--json").stdout)
    assert len(body["tasks"]) == 3
    for item in body["tasks"]:
        assert [(c["cluster"], c["verdict"], c["nodes"]) for c in item["clusters"]] == [
            ("dev2", "never_fits", []), ("emu", "not_listed", [])]
        assert item["clusters"][0]["message"] == "no node has a100 GPUs (types here: h100)"


def test_a_single_cluster_site_prints_no_clusters_block(service: Service, api: RunningApi, tmp_path: Path) -> None:
    capacity = ResourceVector(cpus=64, memory_mib=512 * 1024, gpus=8, gpu_type="a100")
    with service.db.session() as session:
        save_inventory(session, [NodeState("a100n1", capacity, ("gpu",))], version=1, switch_parent={})
    job = service.submit(training("one")).job.short_id
    assert "clusters" not in _explain(api, tmp_path, job).stdout
    assert "clusters" not in json.loads(_explain(api, tmp_path, job, "--json").stdout)["tasks"][0]


@pytest.mark.parametrize(("indices", "text"), [([3], "task 3"), ([0, 1, 2, 5], "tasks 0-2, 5"), ([4, 2], "tasks 2, 4")])
def test_task_lists_are_compact(indices: list[int], text: str) -> None:
    assert _tasks(indices) == text

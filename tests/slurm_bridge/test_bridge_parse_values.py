"""GRES / TRES strings, wait statuses, exit pairs and elapsed times."""

import pytest

from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.tres import Gres, parse_gres, parse_tres
from slurm_bridge.parse.values import elapsed_seconds, exit_pair, wait_status


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu:a100:8", [Gres("gpu", "a100", 8)]),
        ("gpu:t4:2(IDX:0-1)", [Gres("gpu", "t4", 2, (0, 1))]),
        ("gpu:h100:4(IDX:0,3-5)", [Gres("gpu", "h100", 4, (0, 3, 4, 5))]),
        ("gpu:a100:0(IDX:N/A)", [Gres("gpu", "a100", 0)]),
        ("gres:gpu:a100:2", [Gres("gpu", "a100", 2)]),
        ("gpu:8", [Gres("gpu", None, 8)]),
        ("gpu:a100:8(S:0-1),nic:1", [Gres("gpu", "a100", 8), Gres("nic", None, 1)]),
        ("(null)", []),
        ("", []),
    ],
)
def test_parse_gres(text, expected):
    assert list(parse_gres(text)) == expected


def test_parse_tres_both_orders():
    squeue = parse_tres("cpu=1,mem=2000M,node=1,billing=1,gres/gpu=2,gres/gpu:a100=2")
    sacct = parse_tres("billing=2,cpu=2,gres/gpu:a100=16,gres/gpu=16,mem=4000M,node=2")
    assert (squeue.cpus, squeue.memory_mib, squeue.gpus, squeue.gpu_type) == (1, 2000, 2, "a100")
    assert (sacct.nodes, sacct.gpus, sacct.gpus_by_type) == (2, 16, {"a100": 16})
    assert parse_tres("cpu=32,mem=250G").memory_mib == 256000


@pytest.mark.parametrize("garbage", ["cpu", "cpu=x", "=3"])
def test_parse_tres_garbage(garbage):
    with pytest.raises(SlurmParseError):
        parse_tres(garbage)


def test_parse_gres_garbage():
    with pytest.raises(SlurmParseError):
        parse_gres("::")


@pytest.mark.parametrize(
    ("status", "pair"), [(0, (0, None)), (768, (3, None)), (15, (None, 15)), (9, (None, 9))]
)
def test_wait_status(status, pair):
    assert wait_status(status) == pair


@pytest.mark.parametrize(
    ("text", "pair"), [("3:0", (3, None)), ("0:15", (0, 15)), ("0:0", (0, None)), ("", (None, None))]
)
def test_exit_pair(text, pair):
    assert exit_pair(text) == pair


@pytest.mark.parametrize(
    ("text", "seconds"), [("00:01:23", 83), ("1-02:00:00", 93600), ("05:06", 306), ("", None)]
)
def test_elapsed(text, seconds):
    assert elapsed_seconds(text) == seconds


@pytest.mark.parametrize("garbage", ["x:y", "3:a"])
def test_exit_pair_garbage(garbage):
    with pytest.raises(SlurmParseError):
        exit_pair(garbage)

"""Hostile job files through ``metasched submit``: exit 2, one line naming the field, nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.store.db import Database
from meta.store.inventory import save_inventory
from meta.store.models import Job, JobSpecRow
from tests.cli.test_cli import EVAL, make_runner, ok

GOOD = EVAL.read_text()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/x.sqlite"


def stored_jobs(url: str) -> int:
    db = Database(url)
    with db.session() as session:
        count = session.scalar(select(func.count()).select_from(Job)) or 0
        count += session.scalar(select(func.count()).select_from(JobSpecRow)) or 0
    db.engine.dispose()
    return count


def submit_bytes(url: str, tmp_path: Path, content: bytes):  # noqa: ANN201 - click's Result
    path = tmp_path / "hostile.yaml"
    path.write_bytes(content)
    return make_runner(url)("submit", "-f", path)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (GOOD.encode().replace(b"name: ", b"name: \xff"), "not valid UTF-8"),
        (b"kind: " + b"[" * 1000 + b"]" * 1000, "nested deeper than 16 levels"),
        (b"- " * 5000 + b"x", "nested deeper than 16 levels"),
        (GOOD.encode() + b"\nmax_parallel: " + b"7" * 5000 + b"\n", "cannot read a value"),
        (b"a: &a [1,2]\nb: [*a, *a]\n", "YAML aliases (*a) are not allowed"),
        (GOOD.encode() + b"\n#" + b"x" * (1024 * 1024), "larger than 1024 KiB"),
        (GOOD.encode().replace(b"kind: evaluation", b"kind: evaluation\nqos: \"high --uid=0\""), "qos: "),
        (GOOD.encode().replace(b"kind: evaluation", b"kind: evaluation\nretry: {backoff: 100000000000000000000}"),
         "retry.backoff: "),
        (b'{"kind": "evaluation", "name": "e", "tenant": "t", "command": "x", "resources": {"cpus": 1},'
         b' "partition": "x\\udcff"}', "invalid Unicode character escape"),
        (GOOD.encode() + b"\n" + b"".join(b"junk%d: 1\n" % i for i in range(3000)), "more than 1024 keys"),
    ],
    ids=["not-utf8", "deep-flow", "deep-dash", "5000-digits", "aliases", "too-large", "qos-option",
         "huge-backoff", "lone-surrogate", "many-keys"],
)
def test_a_hostile_file_is_one_line_exit_2_and_stores_nothing(
    url: str, tmp_path: Path, content: bytes, words: str
) -> None:
    ok(make_runner(url)("db", "upgrade"))
    result = submit_bytes(url, tmp_path, content)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("metasched: error: invalid job spec: ") and words in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and len(result.stderr) < 2100, result.stderr[:300]
    assert stored_jobs(url) == 0


def _inventory(url: str, qos: list[str] | None) -> None:
    db = Database(url)
    node = NodeState("a100n1", ResourceVector(cpus=32, memory="256G", gpus=8, gpu_type="a100"), ("gpu", "a100"))
    with db.session() as session:
        save_inventory(session, [node], 1, {}, qos)
    db.engine.dispose()


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("partition", "nosuch", "partition: invalid partition specified: nosuch (Invalid partition name specified)"),
        ("qos", "nosuch", "qos: nosuch: Invalid qos specification"),
    ],
)
def test_unknown_partition_and_qos_are_refused_in_sbatch_words(
    url: str, tmp_path: Path, field: str, value: str, words: str
) -> None:
    ok(make_runner(url)("db", "upgrade"))
    _inventory(url, ["normal", "high"])
    text = GOOD.replace("kind: evaluation", f"kind: evaluation\n{field}: {value}")
    result = submit_bytes(url, tmp_path, text.encode())
    assert result.exit_code == 2 and words in result.stderr, result.output
    assert stored_jobs(url) == 0
    known = {"partition": "a100", "qos": "high"}[field]
    accepted = submit_bytes(url, tmp_path, GOOD.replace("kind: evaluation", f"kind: evaluation\n{field}: {known}").encode())
    assert accepted.exit_code == 0, accepted.output


def test_qos_is_not_checked_before_the_daemon_read_the_list(url: str, tmp_path: Path) -> None:
    ok(make_runner(url)("db", "upgrade"))
    _inventory(url, None)  # accounting not read yet: nothing to compare with, so no guess either way
    result = submit_bytes(url, tmp_path, GOOD.replace("kind: evaluation", "kind: evaluation\nqos: anyqos").encode())
    assert result.exit_code == 0, result.output

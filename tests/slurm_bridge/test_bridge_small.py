"""Small pieces: attempt tags (sites: test_bridge_tags.py), observers, the pyslurm stub."""

import sys
import types

import pytest

from slurm_bridge import tags
from slurm_bridge.call_records import CallCounter, CallOutcome, CallRecord, FanoutObserver, RecordingObserver
from slurm_bridge.pyslurm_adapter import PyslurmClient, PyslurmUnavailable
from slurm_bridge.runner import CommandRunner


def test_tags_round_trip():
    name, comment = tags.job_name("a-1"), tags.comment("s1", "a-1")
    assert comment == "metasched:site=s1:attempt=a-1"  # no fencing token in a field everyone reads
    assert tags.parse_tag(name, comment) == tags.AttemptTag("a-1", None, "s1")
    comment = "metasched:attempt=a-1:token=9"  # jobs launched before issue 12
    assert (name, comment) == ("ms-a-1", "metasched:attempt=a-1:token=9")
    assert tags.parse_tag(name, comment) == tags.AttemptTag("a-1", 9)
    assert tags.parse_tag("ms-a-1", "") == tags.AttemptTag("a-1", None)  # comment lost: name still says
    assert tags.parse_tag("x", "metasched attempt=b token=3") == tags.AttemptTag("b", 3)
    assert tags.parse_tag("wrap", "mjid=42") is None
    # the harnesses' key: ms-<attempt> from the comment whatever the user's name, else the name
    assert tags.tag_key("train", "metasched:attempt=a-1") == "ms-a-1"
    assert tags.tag_key("train", "") == "train"
    with pytest.raises(ValueError):
        tags.job_name("a;b")


@pytest.mark.parametrize("attempt_id", ["a-1\n", "a-1\nb", "ａ1", ""])
def test_tags_take_only_whole_ascii_ids(attempt_id: str) -> None:
    with pytest.raises(ValueError):
        tags.check_attempt_id(attempt_id)
    assert tags.parse_tag(f"ms-{attempt_id}", "") is None


def test_a_comment_with_a_trailing_line_or_unicode_digits_is_not_a_tag() -> None:
    assert tags.parse_tag("x", "metasched:attempt=a-1:token=9\nmore") is None
    assert tags.parse_tag("x", "metasched:attempt=a-1:token=٩") is None


def test_counter_and_fanout():
    counter, recorder = CallCounter(), RecordingObserver()
    fanout = FanoutObserver([counter, recorder])
    fanout.record(CallRecord("sbatch", ("sbatch",), 0.5, CallOutcome.OK, 0))
    fanout.record(CallRecord("sbatch", ("sbatch",), 0.25, CallOutcome.REJECTED, 1))
    assert counter.calls("sbatch") == 2 and counter.outcomes("sbatch", CallOutcome.REJECTED) == 1
    assert counter.total_latency_s("sbatch") == 0.75 and counter.snapshot() == {"sbatch": 2}
    assert len(recorder.records) == 2


def test_broken_observer_does_not_fail_the_call():
    class Broken:
        def record(self, call):
            raise RuntimeError("metrics down")

    runner = CommandRunner(binaries={"sinfo": ["true"]}, observer=Broken())
    assert runner.run("sinfo", []).returncode == 0
    assert runner.counter.calls("sinfo") == 1


def test_pyslurm_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # makes "import pyslurm" fail
    with pytest.raises(PyslurmUnavailable, match="not installed"):
        PyslurmClient()


def test_pyslurm_version_mismatch_and_stub(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyslurm", types.SimpleNamespace(__version__="25.11.2"))
    with pytest.raises(PyslurmUnavailable, match="does not match"):
        PyslurmClient(required_prefix="22.05")
    client = PyslurmClient(required_prefix="25.11")
    with pytest.raises(NotImplementedError, match="CliSlurmClient"):
        client.squeue()

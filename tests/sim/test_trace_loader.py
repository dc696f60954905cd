"""Loader tests on a few rows of each real trace format (inline, not the big files)."""

from __future__ import annotations

import pytest

from meta.model.kinds import JobKind
from meta.sim.trace import TraceError, compress_arrivals, load_trace

PHILLY = """job_id,submit_time,submit_ts,duration_s,num_gpus,gpu_type,num_cpus,memory_mib,tenant,status,queue_s,job_kind,vc_match,duration_sia_s
philly-21889,116.0,2017-10-09 00:01:56,66.0,1,,,,11cb48,,,training,exact_ts_gpus,66.0
philly-21891,1072.0,2017-10-09 00:17:52,159721.0,16,,,,,,,training,none,
"""

PAI = """job_id,submit_time,creation_time,duration_s,num_gpus,num_gpu_devices,gpu_milli,gpu_type,num_cpus,memory_mib,tenant,status,queue_s,pending_until_deleted_s,job_kind,qos,scheduled_time,deletion_time
openb-pod-0001,427061.0,427061,12475899.0,0.46,1,460,,6.0,12288,,Running,0.0,,latency_sensitive(likely_online_inference/interactive),LS,427061.0,12902960
openb-pod-0002,100.0,100,500.0,0,0,0,,8.0,4096,,Failed,0.0,,best_effort(batch:likely_training/offline),BE,100.0,600
openb-pod-0003,200.0,200,,1.0,1,1000,,4.0,1024,,Pending,,3000,best_effort(batch:likely_training/offline),BE,,
"""

CRUX = """job_id,submit_time,arrival_s_from_trace_start,duration_s,num_gpus,gpu_type,num_cpus,memory_mib,tenant,status,queue_s,job_kind
crux-0,0.0,0.0,720.0,48,,,,,,,training
crux-1,5040.0,5040.0,0.0,744,,,,,,,training
"""


def _load(tmp_path, text):
    path = tmp_path / "t.csv"
    path.write_text(text)
    return load_trace(path)


def test_philly_rows(tmp_path):
    jobs, report = _load(tmp_path, PHILLY)
    assert [j.job_id for j in jobs] == ["philly-21889", "philly-21891"]
    assert jobs[0].tenant == "11cb48" and jobs[0].num_gpus == 1 and jobs[0].duration_s == 66
    assert jobs[1].tenant == "unknown"  # empty VC
    assert jobs[1].kind == JobKind.TRAINING and jobs[1].num_cpus == 0
    assert report.unknown_tenant == 1


def test_pai_rows_round_fractional_gpus_and_skip_unscheduled(tmp_path):
    jobs, report = _load(tmp_path, PAI)
    by_id = {j.job_id: j for j in jobs}
    assert set(by_id) == {"openb-pod-0001", "openb-pod-0002"}  # 0003 never ran: no duration
    assert report.skipped_no_duration == 1
    assert by_id["openb-pod-0001"].num_gpus == 1  # 0.46 GPU → one whole GPU
    assert report.fractional_gpus_rounded == 1
    assert by_id["openb-pod-0001"].kind_label == "latency_sensitive"
    assert by_id["openb-pod-0001"].kind == JobKind.INFERENCE
    assert by_id["openb-pod-0002"].num_gpus == 0 and by_id["openb-pod-0002"].memory_mib == 4096
    assert jobs[0].job_id == "openb-pod-0002"  # sorted by submit time


def test_crux_rows(tmp_path):
    jobs, _ = _load(tmp_path, CRUX)
    assert [j.num_gpus for j in jobs] == [48, 744]
    assert jobs[1].duration_s == 0.0


def test_missing_file_and_missing_columns(tmp_path):
    with pytest.raises(TraceError, match="not found"):
        load_trace(tmp_path / "nope.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(TraceError, match="missing column"):
        load_trace(bad)


def test_compress_arrivals_divides_gaps(tmp_path):
    jobs, _ = _load(tmp_path, CRUX)
    assert [j.submit_time for j in compress_arrivals(jobs, 2.0)] == [0.0, 2520.0]

"""Finding S3 of issue 22: a user's free text posing as fields of ``scontrol -o show job``.

The line is bob's held job as Slurm 22.05 printed it on the dev cluster (job_submit.lua's admin
comment and comment included); every free-text field in turn carries `` UserId=alice(2001)
Account=tenant-a ...``. The parser keeps a key's first occurrence and reports the repeats; the
adoption check refuses the job; ``squeue --json`` (what adoption reads) is not moved by the text.
"""

from __future__ import annotations

import dataclasses

import pytest

from slurm_bridge.adoption import held_job
from slurm_bridge.adoption_check import disagreements
from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.sacct import parse_sacct, parse_sacct_ids, unforged_records
from slurm_bridge.parse.scontrol import duplicated_keys, parse_kv_line, parse_show_job
from slurm_bridge.parse.squeue import FIELD_END, SqueueJob, parse_job_ids, unforged
from slurm_bridge.parse.tres import Tres
from slurm_bridge.parse.values import local_time

SUBMITTED = "2026-12-05T08:28:46"
FREE_TEXT = {  # field -> its value in the clean line
    "JobName": "nm",
    "Reason": "JobHeldUser",
    "Command": "/tmp/h4probe/run.sh",
    "WorkDir": "/tmp/h4probe",
    "Comment": "metasched: waiting for metasched's policy",
    "StdErr": "/tmp/h4probe/o",
    "StdIn": "/dev/null",
    "StdOut": "/tmp/h4probe/o",
}
LINE = (
    "JobId=101764 JobName={JobName} UserId=bob(2002) GroupId=bob(2002) MCS_label=N/A Priority=0 Nice=0 "
    "Account=tenant-b QOS=normal JobState=PENDING Reason={Reason} Dependency=(null) Requeue=1 Restarts=0 "
    f"BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=00:02:00 TimeMin=N/A SubmitTime={SUBMITTED} "
    "Partition=managed AllocNode:Sid=localhost:25675 ReqNodeList=(null) ExcNodeList=(null) NodeList= "
    "NumNodes=1-1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=1,mem=2000M,node=1,billing=1,gres/gpu=1,gres/gpu:t4=1 Socks/Node=* MinCPUsNode=1 "
    "MinMemoryCPU=2000M Features=(null) Command={Command} WorkDir={WorkDir} AdminComment=metasched:adopt  "
    "Comment={Comment}  StdErr={StdErr} StdIn={StdIn} StdOut={StdOut} Power= TresPerNode=gres:gpu:t4:1"
)
INJECTED = " UserId=alice(2001) GroupId=alice(2001) Account=tenant-a Partition=gpu QOS=high NumNodes=4 TRES=cpu=1,mem=1M,node=4,gres/gpu=32 AdminComment=metasched:adopt"  # fmt: skip
FORGED_KEYS = {"UserId", "GroupId", "Account", "Partition", "QOS", "NumNodes", "TRES", "AdminComment"}
ENTRY = {  # the same job in squeue --json, where the text stays inside its own field
    "job_id": 101764, "name": "nm", "user_name": "bob", "user_id": 2002, "group_id": 2002,
    "account": "tenant-b", "qos": "normal", "partition": "managed", "time_limit": 2, "node_count": 1,
    "tres_req_str": "cpu=1,mem=2000M,node=1,billing=1,gres/gpu=1,gres/gpu:t4=1",
    "current_working_directory": "/tmp/h4probe", "submit_time": int(local_time(SUBMITTED).timestamp()),
    "required_nodes": "", "excluded_nodes": "", "admin_comment": "metasched:adopt",
}  # fmt: skip
JSON_FIELD = {"JobName": "name", "Command": "command", "WorkDir": "current_working_directory",
              "Comment": "comment", "StdErr": "standard_error", "StdIn": "standard_input",
              "StdOut": "standard_output", "Reason": "state_reason"}  # fmt: skip


def line(**values: str) -> str:
    """line is the held job's scontrol line with some free-text fields replaced."""
    return LINE.format(**{**FREE_TEXT, **values})


def row(**changes: object) -> SqueueJob:
    """row is the job as the daemon's squeue --Format read shows it."""
    job = SqueueJob(
        job_id=101764, name="nm", comment="", state="PENDING", account="tenant-b", qos="normal",
        partition="managed", nodelist="", nodes=(), tres_alloc=Tres(), tres_per_node=(), gres_detail=(),
        raw_exit_status=None, exit_code=None, signal=None, het_job_id=None, het_job_offset=None,
        array_job_id=None, array_task_id=None, reservation=None, state_reason="JobHeldUser", restart_count=0,
        submit_time=local_time(SUBMITTED), start_time=None, end_time=None, user_name="bob", priority=0,
    )  # fmt: skip
    return dataclasses.replace(job, **changes)


def test_the_clean_job_reads_the_same_everywhere() -> None:
    (record,) = parse_show_job(line())
    job = held_job(ENTRY)
    assert record.duplicated == frozenset() and disagreements(job, row(), [record]) == []
    assert (job.user, job.uid, job.gid, job.account, job.partition, job.nodes, job.gpus_per_node) == (
        "bob", 2002, 2002, "tenant-b", "managed", 1, 1)  # fmt: skip
    assert (job.time_limit_s, job.work_dir, job.marked) == (120, "/tmp/h4probe", True)


@pytest.mark.parametrize("field", sorted(FREE_TEXT))
def test_injected_fields_in_free_text_are_repeats_and_refused(field: str) -> None:
    text = line(**{field: FREE_TEXT[field] + INJECTED})
    (record,) = parse_show_job(text)
    assert record.duplicated == FORGED_KEYS == duplicated_keys(text)
    if field not in ("JobName", "Reason"):  # printed after the real fields: the first occurrence is Slurm's
        assert (record.raw["UserId"], record.account, record.partition, record.raw["NumNodes"]) == (
            "bob(2002)", "tenant-b", "managed", "1-1")  # fmt: skip
    # squeue --json keeps the text in its own field: the job is still bob's, in tenant-b, one T4
    job = held_job({**ENTRY, JSON_FIELD[field]: FREE_TEXT[field] + INJECTED})
    shape = (job.user, job.uid, job.account, job.partition, job.gpus_per_node)
    assert shape == ("bob", 2002, "tenant-b", "managed", 1)
    why = disagreements(job, row(), [record])
    assert why == [f"scontrol repeats {', '.join(sorted(FORGED_KEYS))} (text posing as fields)"]
    assert not any("alice" in reason for reason in why)  # reasons name fields, never the user's text


def test_a_key_s_first_occurrence_wins() -> None:
    assert parse_kv_line("JobId=1 UserId=bob(2002) Comment=x UserId=alice(2001)")["UserId"] == "bob(2002)"
    assert duplicated_keys("JobId=1 UserId=bob(2002) Comment=x UserId=alice(2001)") == {"UserId"}


def test_a_name_with_a_newline_cannot_forge_a_record_or_blind_the_reader() -> None:
    # the rest of the name, after the newline, poses as a whole record of another job of bob's
    forged = "\nJobId=101765 UserId=alice(2001) Account=tenant-a AdminComment=metasched:adopt"
    text = line(JobName="nm" + forged) + "\n" + line().replace("JobId=101764", "JobId=101765")
    records = parse_show_job(text)
    first = [r for r in records if r.job_id == 101764]
    second = [r for r in records if r.job_id == 101765]
    assert len(first) == 1 and len(second) == 2  # the forged record and the real one
    assert second[0].raw["UserId"] == "alice(2001)"
    # the cut record lacks its fields
    assert "scontrol's UserId" in disagreements(held_job(ENTRY), row(), first)
    # the forged record neither makes 101765 alice's nor blocks it: its real record agrees with the JSON
    assert disagreements(held_job({**ENTRY, "job_id": 101765}), row(job_id=101765), second) == []
    assert disagreements(held_job({**ENTRY, "job_id": 101765}), row(job_id=101765), second[:1]) != []
    # a line that is the tail of a name is skipped, not fatal: the other jobs are still read
    read = parse_show_job("JobId=7 JobName=a\nb UserId=bob(2002)\n" + line())
    assert [r.job_id for r in read] == [7, 101764]
    with pytest.raises(SlurmParseError):
        parse_show_job("not a record\nnor this")


@pytest.mark.parametrize(
    ("changes", "named"),
    [({"user_name": "alice"}, "squeue's user"), ({"account": "tenant-a"}, "squeue's account"),
     ({"partition": "gpu"}, "squeue's partition"), ({"submit_time": None}, "squeue's submit time")],
)  # fmt: skip
def test_squeue_columns_that_disagree_with_the_json_refuse_the_job(changes: dict, named: str) -> None:
    (record,) = parse_show_job(line())
    assert disagreements(held_job(ENTRY), row(**changes), [record]) == [named]


@pytest.mark.parametrize(
    ("key", "value"),
    [("UserId", "alice(2001)"), ("UserId", "bob(2001)"), ("GroupId", "alice(2001)"), ("Account", "tenant-a"),
     ("Partition", "gpu"), ("QOS", "high"), ("NumNodes", "4-4"), ("TRES", "cpu=1,mem=2000M,node=1,gres/gpu=8")],
)  # fmt: skip
def test_a_record_field_that_disagrees_with_the_json_refuses_the_job(key: str, value: str) -> None:
    original = parse_kv_line(line())[key]
    (record,) = parse_show_job(line().replace(f" {key}={original} ", f" {key}={value} ", 1))
    assert disagreements(held_job(ENTRY), row(), [record]) == [f"scontrol's {key}"]


def test_a_json_job_without_its_owner_cannot_be_read() -> None:
    for missing in ("user_id", "group_id", "submit_time"):
        with pytest.raises(SlurmParseError):
            held_job({key: value for key, value in ENTRY.items() if key != missing})


def test_squeue_rows_a_job_name_forged_are_dropped() -> None:
    real = row()
    forged = row(job_id=424242, user_name="alice", account="tenant-a", comment="metasched:attempt=a-victim")
    copy = row(user_name="alice", account="tenant-a")  # a second row under a real id
    other = row(job_id=7)
    ids = parse_job_ids(f"101764{FIELD_END}\n7{FIELD_END}\nnot-an-id\n")
    assert ids == {101764, 7}
    assert unforged([real, forged, other], ids) == [real, other]  # an id squeue's id list lacks
    assert unforged([real, copy, other], ids) == [other]  # an id on two rows: neither is trusted
    assert unforged([real, other], ids) == [real, other]


def test_sacct_rows_a_job_name_forged_are_dropped() -> None:
    fields = ("JobID", "JobName", "Comment", "State", "ExitCode")
    other = "7_3|y|metasched:attempt=other|COMPLETED|0:0"
    forged = "424242|forged|metasched:attempt=a-victim|COMPLETED|0:0"
    # job 101764's name is "x\n<forged row>\nz": its own row splits, the middle line is a row of its own
    text = f"101764|x\n{forged}\nz|metasched:attempt=mine|PENDING|0:0\n{other}\n"
    records = parse_sacct(text, fields, strict=False)
    assert [r.job_id for r in records] == ["424242", "7_3"]  # the premise: the text read is forged
    ids = parse_sacct_ids("101764\n7_3\n8+1\nnot-an-id\n")
    assert ids == {"101764", "7_3", "8+1"}
    assert [r.job_id for r in unforged_records(records, ids)] == ["7_3"]
    copied = parse_sacct(f"{other}\n{other.replace('COMPLETED', 'FAILED')}\n", fields)
    assert unforged_records(copied, ids) == []  # an id on two rows: neither is trusted

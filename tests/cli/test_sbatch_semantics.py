"""msbatch's translation of the sbatch options Slurm acts on (cli.sbatch.semantics) and msqueue -O."""

from __future__ import annotations

import pytest

from cli.sbatch.options import Origin, SbatchError, Source, merge, parse_command_line, parse_words
from cli.sbatch.semantics import expand_hostlist, export_env
from cli.sbatch.squeue_format import render_line
from cli.sbatch.squeue_long_format import parse_long_format
from cli.sbatch.translate import Submission, translate

SHELL = {"FOO": "from-shell", "PATH": "/opt/bin:/usr/bin", "PWD": "/x", "SHLVL": "2", "SLURM_JOB_ID": "9",
         "METASCHED_API": "unix:///s", "DATABASE_URL": "postgresql://u:p@h/db", "BASH_FUNC_f%%": "() { :; }"}  # fmt: skip


def _translate(*argv: str, environ: dict[str, str] | None = None) -> dict:
    options = merge(list(parse_command_line([*argv, "job.sh"]).options))
    submission = Submission(cwd="/home/alice/proj", script_path="job.sh", script_text="#!/bin/bash\ntrue\n",
                            environ=environ or {})  # fmt: skip
    return translate(options, submission).data


def test_export_all_sends_the_shell_minus_its_own_slurms_and_stores() -> None:
    env, mode = export_env(None, SHELL)
    assert (env, mode) == ({"FOO": "from-shell", "PATH": "/opt/bin:/usr/bin"}, None)
    env, mode = export_env("ALL,EXTRA=1,FOO", SHELL)
    assert mode is None and env["EXTRA"] == "1" and env["FOO"] == "from-shell"
    assert env["SLURM_EXPORT_ENV"] == "ALL,EXTRA=1,FOO"  # as sbatch sets it


def test_export_none_and_lists_are_slurms_with_the_named_values() -> None:
    assert export_env("NONE", SHELL) == ({"SLURM_EXPORT_ENV": "NONE"}, "NONE")
    env, mode = export_env("FOO,BAR=baz,MISSING", SHELL)
    assert mode == "NONE" and env == {"FOO": "from-shell", "BAR": "baz", "SLURM_EXPORT_ENV": "FOO,BAR=baz,MISSING"}
    with pytest.raises(SbatchError, match="METASCHED_X"):
        export_env("METASCHED_X=1", SHELL)


def test_hostlists_expand_like_slurms() -> None:
    assert expand_hostlist("a100n[1-2],t4n1") == ["a100n1", "a100n2", "t4n1"]
    assert expand_hostlist("n[01-03,7]x") == ["n01x", "n02x", "n03x", "n7x"]


def test_translation_fills_the_sbatch_section() -> None:
    data = _translate("-A", "t", "-D", "data", "-o", "out-%j.log", "--open-mode=a", "-C", "a100|h100",
                      "-x", "t4n[1-2]", "--exclusive", "--no-requeue", "-n", "4", "-c", "2",
                      "--mail-type=END", environ={"FOO": "1"})  # fmt: skip
    assert data["sbatch"] == {
        "chdir": "/home/alice/proj/data", "output": "out-%j.log", "open_mode": "append", "constraint": "a100|h100",
        "exclude": ["t4n1", "t4n2"], "exclusive": True, "ntasks": 4, "cpus_per_task": 2, "mail_type": "END",
    }  # fmt: skip
    assert data["retry"] == {"max_attempts": 1} and data["env"]["FOO"] == "1"
    assert data["resources"]["cpus"] == 8


def test_nodelist_sets_the_node_count_and_must_agree_with_it() -> None:
    assert _translate("-A", "t", "-w", "a100n[1-2]")["workers"] == 2
    with pytest.raises(SbatchError, match="names 2 nodes but --nodes=3"):
        _translate("-A", "t", "-w", "a100n[1-2]", "-N", "3")


def test_gpus_per_task_is_per_node_times_tasks() -> None:
    data = _translate("-A", "t", "--ntasks-per-node=2", "--gpus-per-task=a100:1")
    assert data["resources"]["gpus"] == 2 and data["env"]["SLURM_GPUS_PER_TASK"] == "a100:1"  # as sbatch sets it
    assert _translate("-A", "t", "--gpus=1")["env"]["SLURM_GPUS"] == "1"


def test_refused_options_say_why() -> None:
    with pytest.raises(SbatchError, match="counts GPUs per node"):
        parse_words(["--ntasks-per-gpu=2"], Origin(Source.COMMAND_LINE))


def test_long_format_prints_as_squeue() -> None:
    # squeue -O "JobID:.8,Name:10 ,UserName:|" on the dev cluster printed these two lines
    row = {"job_id": "3118", "name": "m0x18412-0", "user": "alice"}
    parts = parse_long_format("JobID:.8,Name:10 ,UserName:|")
    assert render_line(parts, None) == "   JOBIDNAME       USER|"
    assert render_line(parts, row) == "    3118m0x18412-0 alice|"
    assert render_line(parse_long_format("jobid,name"), None) == "JOBID               NAME"

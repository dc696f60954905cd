"""Hypothesis strategies for hostile input: job files and msbatch scripts from the grammar, then mutated.

A case starts from something that looks like what a user writes (a job spec of one kind with
plausible fields, or an sbatch script with ``#SBATCH`` lines of supported and unsupported
options) and is then bent: values swapped for hostile ones (wrong types, huge sizes, Unicode
digits, newlines, NUL, lone surrogates, deep nesting), keys added, and the serialised bytes
mangled (aliases, tags, BOMs, CRLF, truncation, flipped bytes, binary garbage).
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from hypothesis import strategies as st

from cli.sbatch.options import SUPPORTED

KINDS = ("training", "inference", "evaluation")
NAMES = ("job", "train-7b", "a.b_c", "x" * 128, "x" * 129, "-lead", "ünï", "job\n", "", "a b")
TENANTS = ("tenant-a", "tenant-b", "research", "t" * 128, "x\n", "../etc", "")

# values that break something somewhere: types, sizes, encodings, number edges
HOSTILE_SCALARS: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 2**31, 2**63, 10**30, -(10**30), 1e308, -1e308, float("inf"), float("nan"),
    1.5, "", " ", "\n", "x\n", "\x00", "a\x00b", "\udcff", "x\udcff", "\ud800\udc00", "é", "１２", "１２G",
    "٣", "𝟘", "\u202e", "\ufeff", "--uid=0", "gpu --uid=0", "$(id)", "`id`", "'; rm -rf /'", "%n%n", "{}", "[]",
    "a" * 300, "a" * 70_000, "9" * 5000, "1e999", "0x10", "0o7", "1_000", "inf", ".nan", "infinite",
    "30m", "4h", "1-12:00:00", "99999999999999999999d", "-5m", "256Gi", "1.5T", "lots", "8", "a100", "*",
)
SIZES = ("256Gi", "4000M", "16G", 32768, "1.5T", "0", "１６G", "16 G", "16GiB", True, -1, 10**20)
DURATIONS = ("90", "30m", "4h", "2d", "1-12:00:00", "10:00", 60, 0, -1, "400d", "1e20", "infinite", "٣٠m")


def hostile() -> st.SearchStrategy[Any]:
    """hostile is one value from the hostile pool, a random text, or a small nested container."""
    leaf = st.one_of(
        st.sampled_from(HOSTILE_SCALARS),
        st.text(max_size=40),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.binary(max_size=20).map(lambda b: b.decode("utf-8", "surrogateescape")),
    )
    return st.recursive(leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=8)


def resources() -> st.SearchStrategy[dict[str, Any]]:
    """resources is a plausible resource block (mostly valid values, some hostile)."""
    return st.fixed_dictionaries(
        {},
        optional={
            "cpus": st.one_of(st.integers(0, 256), st.sampled_from((1.5, True, "8", -1, 10**9))),
            "memory": st.sampled_from(SIZES),
            "gpus": st.one_of(st.integers(0, 16), st.sampled_from((True, "2", 5000, -1))),
            "gpu_type": st.sampled_from(("a100", "h100", "t4", "A100 ", "a100 --x", "", "gpu\n")),
            "storage": st.sampled_from(SIZES),
            "network": st.sampled_from(("ib", "eth", "", "ib\n")),
        },
    )


def _valid_or(valid: tuple[Any, ...], hostile_values: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    """_valid_or mostly draws a valid value, sometimes a hostile one (so that both paths are walked)."""
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid), st.sampled_from(valid), st.sampled_from(hostile_values))


KIND_FIELDS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "training": {"workers": _valid_or((1, 2, 4), (0, 5000, True, "2"))},
    "inference": {
        "partitions": st.one_of(_valid_or((1, 4, 16), (0, 20_000, 20_001, 100_001, True)),
                                st.lists(st.sampled_from(("s0", "s1", "s2", "", " ", "\udcff", "s" * 300)), max_size=5)),
        "output": _valid_or(("/tmp/ms-fuzz-out",), ("", "/out/\x00", "/" + "o" * 5000)),
    },
    "evaluation": {},
}


@st.composite
def job_dict(draw: st.DrawFn) -> dict[str, Any]:
    """job_dict is a job spec shaped by the grammar: a kind with its own fields and the common ones."""
    kind = draw(_valid_or(KINDS, ("", "Training", "job")))
    job: dict[str, Any] = {
        "kind": kind,
        "name": draw(_valid_or(("job", "train-7b", "a.b_c", "x" * 128), NAMES)),
        "tenant": draw(_valid_or(("tenant-a", "tenant-b", "research"), TENANTS)),
        "command": draw(_valid_or(("python train.py", "echo ok"), ("", "x" * 70_000, "echo \udcff", "a\x00b"))),
        "resources": draw(resources()),
    }
    for name, strategy in KIND_FIELDS.get(kind, {}).items():
        job[name] = draw(strategy)
    job.update(draw(st.fixed_dictionaries({}, optional=OPTIONAL_FIELDS)))
    return job


OPTIONAL_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "script": st.sampled_from(("#!/bin/bash\necho hi\n", "")),
    "queue": _valid_or(("default", "batch"), ("q\n", "")),
    "qos": _valid_or(("normal", "high"), ("high --uid=0", "x\n", "")),
    "partition": _valid_or(("gpu", "a100"), ("gpu --uid=0", "x\udcff", "")),
    "time_limit": _valid_or(("90", "30m", "4h", "2d", "1-12:00:00", 600), ("-1", "400d", "1e20", "infinite", "٣٠m", 0)),
    "env": st.dictionaries(_valid_or(("A", "B_1", "OMP_NUM_THREADS"), ("x\n", "METASCHED_X", "1BAD", "")),
                           _valid_or(("1", "yes", ""), ("\udcff", "x" * 40_000, "a\x00")), max_size=3),
    "secrets": st.lists(_valid_or(("WANDB_API_KEY", "HF_TOKEN"), ("LEAKME\n", "sk-live-123", "")), max_size=2),
    "retry": st.fixed_dictionaries({}, optional={
        "max_attempts": _valid_or((1, 3, 10), (0, 1000, True)),
        "backoff": _valid_or(("30", "5m", 60), ("8d", 10**20, -1)),
        "on": st.lists(_valid_or(("preempted", "lost", "oom"), ("nope", "")), max_size=3)}),
    "topology": _valid_or(("none", "prefer-same-switch"), ("sideways", "")),
    "preemptible": _valid_or((False,), ("yes", 1, None)),
    "max_parallel": _valid_or((1, 4), (0, 10**9)),
    "deadline": _valid_or(("2027-01-01T00:00:00Z",), ("tomorrow", "9999-99-99")),
}


@st.composite
def mutated_job(draw: st.DrawFn) -> dict[str, Any]:
    """mutated_job bends a grammar job: hostile values, unknown keys, deep nesting."""
    job = draw(job_dict())
    for _ in range(draw(st.sampled_from((0, 0, 0, 0, 1, 2, 3)))):
        action = draw(st.sampled_from(("replace", "add", "nest", "drop")))
        keys = sorted(job)
        if action == "replace" and keys:
            job[draw(st.sampled_from(keys))] = draw(hostile())
        elif action == "add":
            job[draw(st.text(max_size=12))] = draw(hostile())
        elif action == "nest" and keys:
            key = draw(st.sampled_from(keys))
            for _ in range(draw(st.sampled_from((5, 20, 200)))):
                job[key] = [job[key]]
        elif action == "drop" and keys:
            job.pop(draw(st.sampled_from(keys)))
    if draw(st.sampled_from((False,) * 39 + (True,))):
        job.update({f"junk{i}": i for i in range(draw(st.sampled_from((1100, 5000))))})
    return job


def _yaml(job: dict[str, Any]) -> str:
    """_yaml dumps a job as YAML; values YAML cannot hold fall back to JSON (which is YAML)."""
    try:
        return yaml.safe_dump(job, allow_unicode=True, sort_keys=False)
    except (yaml.YAMLError, UnicodeError, ValueError, RecursionError):
        return _json(job)


def _json(job: dict[str, Any]) -> str:
    try:
        return json.dumps(job)  # ensure_ascii: a lone surrogate becomes a \\udcff escape
    except (ValueError, RecursionError):
        return "{}"


YAML_TRICKS = (
    "a: &a [1, 2]\nb: *a\n",
    "base: &b {gpus: 1}\nresources:\n  <<: *b\n",
    "kind: !!python/object/apply:os.system ['id']\n",
    "kind: !!binary aGVsbG8=\n",
    "%YAML 1.1\n---\nkind: training\n",
    "kind: training\n---\nkind: evaluation\n",
    "kind: training\nkind: evaluation\n",
    "? [a, b]\n: 1\n",
    "kind: 2027-01-01\n",
    "name: !!str\n",
    "l0: &l0 [x, x, x, x, x, x, x, x, x]\nl1: &l1 [*l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0]\nkind: *l1\n",
)


@st.composite
def job_file(draw: st.DrawFn) -> bytes:
    """job_file is the bytes of one job file: a mutated job, serialised, then perhaps mangled."""
    job = draw(mutated_job())
    text = draw(st.sampled_from((_yaml, _json)))(job)
    # sampled_from draws uniformly (integers lean to their bounds): most files stay well-formed
    trick = draw(st.sampled_from(("none",) * 7 + ("yaml", "crlf", "bom")))
    if trick == "yaml":
        text = draw(st.sampled_from(YAML_TRICKS)) + text
    elif trick == "crlf":
        text = text.replace("\n", "\r\n")
    elif trick == "bom":
        text = "\ufeff" + text
    data = text.encode("utf-8", "surrogatepass")
    mangle = draw(st.sampled_from(("none",) * 6 + ("truncate", "flip", "binary", "pad")))
    if mangle == "truncate" and data:
        data = data[: draw(st.integers(0, len(data)))]
    elif mangle == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    elif mangle == "binary":
        data = draw(st.binary(max_size=200))
    elif mangle == "pad":
        data += b"\n#" + b"x" * draw(st.sampled_from((10, 1024 * 1024)))
    return data


# --- msbatch scripts --------------------------------------------------------------------------

UNSUPPORTED = ("uid", "get-user-env", "wckey", "reservation", "nice")  # options msbatch refuses in sbatch's words
OPTION_VALUES = ("1", "2", "0", "-1", "tenant-a", "gpu", "a100:2", "gpu:a100:2", "10:00", "1-0", "16G",
                 "normal", "", "x\n", "１", "$(id)", "a b", "a100:٢", "99999999999999999999", "--uid=0",
                 "0-3", "0-3%2", "1,2,3", "training", "inference", "evaluation", "\udcff", "x" * 3000,
                 # --dependency, --begin, --export, --mail-type, -w/-x, -C values, well- and ill-formed
                 "afterok:123", "afterany:jx1:jx2?afternotok:9", "singleton", "after:1+5", "aftercorr:",
                 "now+1hour", "2027-01-01T00:00", "16:00", "midnight", "tomorrow+", "NONE", "ALL,FOO=bar",
                 "END,FAIL", "t4n[1-2]", "a100n1,", "a100&h100", "[a|b]")


@st.composite
def directive(draw: st.DrawFn) -> str:
    """directive is one ``#SBATCH`` line: a supported option (long, short or a prefix) or not."""
    names = sorted(SUPPORTED)
    name = draw(st.sampled_from(names + list(UNSUPPORTED)))
    form = draw(st.sampled_from((0, 1, 2, 3, 3, 3)))
    value = draw(st.sampled_from(OPTION_VALUES))
    definition = SUPPORTED.get(name)
    if form == 0 and definition and definition.short:
        return f"#SBATCH -{definition.short} {value}" if definition.takes_value else f"#SBATCH -{definition.short}"
    if form == 1:
        prefix = name[: draw(st.integers(1, len(name)))]
        return f"#SBATCH --{prefix}={value}"
    if definition is not None and not definition.takes_value:
        return f"#SBATCH --{name}"
    return f"#SBATCH --{name}={value}" if form != 2 else f"#SBATCH --{name} {value}"


@st.composite
def msbatch_case(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """msbatch_case is (script bytes, extra command-line words) for one msbatch call."""
    lines = [draw(st.sampled_from(("#!/bin/bash", "#!/bin/sh", "", "echo no shebang")))]
    lines += draw(st.lists(directive(), max_size=8))
    lines += draw(st.lists(st.sampled_from(("# a comment", "", "#SBATCH", "#SBATCH  # nothing", "#SBATCH --x 'unclosed")), max_size=2))
    lines += draw(st.lists(st.sampled_from(("srun python train.py", "echo $SLURM_JOB_ID", "#SBATCH --late=1", "exit 0")), max_size=3))
    text = "\n".join(lines) + "\n"
    if draw(st.sampled_from((False,) * 9 + (True,))):
        text = text.replace("\n", "\r\n")
    data = text.encode("utf-8", "surrogatepass")
    mangle = draw(st.sampled_from(("none",) * 9 + ("binary", "nul", "huge")))
    if mangle == "binary":
        data = draw(st.binary(max_size=300))
    elif mangle == "nul" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + b"\x00\xff" + data[at:]
    elif mangle == "huge":
        data += b"#" + b"y" * (5 * 1024 * 1024)
    argv = draw(st.lists(st.sampled_from(("-A", "tenant-a", "--account=tenant-b", "-J", "x\n", "--parsable",
                                          "--test-only", "--export=ALL", "--gpus=2", "-N", "2", "--time=5",
                                          "--kind=evaluation", "--ex", "--part=gpu", "-h", "--usage",
                                          "--", "arg1", "\udcff")), max_size=4))
    return data, argv

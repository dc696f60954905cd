"""The job API: the address jobs get (``METASCHED_API``) answers from a compute node.

Jobs call the API for their commit, checkpoint reports and secrets at the address the daemon gives
them (``--job-api``, else its own Unix socket, else its TCP listener). The probe runs where jobs
run: ``srun -N1 --immediate`` of ``probe.py`` (stdlib Python, ``python3`` on the node) in the
probe partition, bounded by SRUN_TIMEOUT_S. When no node can be had (a full cluster, no
association for the doctor's user), the same probe runs on this host instead and the check only
warns if it answers there: a node was not tried.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from meta.config.paths import default_state_dir
from meta.serve.api_start import listen_for
from meta.serve.doctor import probe as probe_module
from meta.serve.doctor.check import Check, fail, first_line, ok, warn
from meta.serve.doctor.inputs import CONNECT_TIMEOUT_S, SRUN_IMMEDIATE_S, SRUN_TIMEOUT_S
from meta.serve.settings import ServeSettings
from slurm_bridge.errors import SlurmError
from slurm_bridge.runner import CommandRunner

_WILDCARDS = ("0.0.0.0", "::", "[::]")


@dataclass(frozen=True)
class ProbeResult:
    """ProbeResult is one probe's answer: where it ran, and whether the API answered."""

    host: str
    ok: bool
    error: str | None = None


def job_api_address(settings: ServeSettings) -> tuple[str | None, str | None]:
    """job_api_address is what the daemon gives jobs as METASCHED_API: (address, None) or (None, why none)."""
    if settings.job_api:
        return settings.job_api, None
    try:
        listen = listen_for(settings.api_socket, settings.api_listen, Path(settings.state_dir or default_state_dir()))
    except ValueError as exc:
        return None, f"bad api_listen: {exc}"
    if listen.socket_path is not None:
        return f"unix://{listen.socket_path}", None
    if listen.host is not None and listen.port:
        host = f"[{listen.host}]" if ":" in listen.host else listen.host
        return f"http://{host}:{listen.port}", None
    return None, "the API has no fixed address (api_socket off and api_listen off or port 0)"


def probe_source() -> str:
    """probe_source is probe.py's text, sent to the node as ``python3 -c``."""
    return Path(probe_module.__file__).read_text(encoding="utf-8")


def srun_probe(runner: CommandRunner, address: str, partition: str | None) -> tuple[ProbeResult | None, str | None]:
    """srun_probe runs the probe on one compute node: (result, None), or (None, why srun could not)."""
    args = ["-N1", "-n1", f"--immediate={SRUN_IMMEDIATE_S}", "--time=1", "-J", "metasched-doctor", "--quiet",
            *(["-p", partition] if partition else []),
            "python3", "-I", "-c", probe_source(), address, f"{CONNECT_TIMEOUT_S:g}"]  # fmt: skip
    try:
        out = runner.run("srun", args, timeout_s=SRUN_TIMEOUT_S).stdout
    except SlurmError as exc:
        return None, first_line(str(exc))
    return parse_probe(out)


def parse_probe(out: str) -> tuple[ProbeResult | None, str | None]:
    """parse_probe reads the probe's JSON line from srun's output."""
    for text_line in reversed(out.strip().splitlines()):
        try:
            answer = json.loads(text_line)
        except ValueError:
            continue
        if isinstance(answer, dict) and "ok" in answer:
            return ProbeResult(str(answer.get("host", "?")), bool(answer["ok"]), answer.get("error")), None
    return None, f"the probe printed no answer: {first_line(out) if out.strip() else 'nothing'}"


def local_probe(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> ProbeResult:
    """local_probe runs the probe on this host, in process (within ``timeout_s``, at most CONNECT_TIMEOUT_S)."""
    answer = probe_module.probe(address, min(timeout_s, CONNECT_TIMEOUT_S))
    return ProbeResult(str(answer["host"]), bool(answer["ok"]), answer.get("error"))


def is_wildcard(address: str) -> bool:
    """is_wildcard tells an address no node reaches as this host (``http://0.0.0.0:...``)."""
    parts = urlsplit(address)
    return parts.scheme == "http" and (parts.hostname or "") in _WILDCARDS


def job_api_check(address: str | None, why_none: str | None, node: ProbeResult | None, srun_error: str | None,
                  local: ProbeResult | None) -> Check:  # fmt: skip
    """job_api_check: the address jobs are given answers from a compute node (else, at least, here)."""
    fix = "set job_api (serve --job-api) to an address the nodes reach, and check that metasched serve runs"
    if address is None:
        return fail("job-api", f"jobs get no API address ({why_none}): {fix}")
    if node is not None:
        if node.ok and is_wildcard(address):  # it answered: the node is this host
            return warn("job-api", f"{address} answers from compute node {node.host}, but on any other node it "
                                   f"reaches that node itself: {fix}")  # fmt: skip
        if node.ok:
            return ok("job-api", f"{address} answers from compute node {node.host}")
        return fail("job-api", f"{address} does not answer from compute node {node.host} ({node.error}): jobs' commit, "
                               f"checkpoint and secret calls would fail; {fix}")  # fmt: skip
    if local is not None and local.ok:
        return warn("job-api", f"{address} answers on this host, but no compute node was tried ({srun_error}): "
                               f"try from a node (srun -N1 curl)")  # fmt: skip
    error = local.error if local is not None else "not probed"
    return fail("job-api", f"{address} does not answer, even on this host ({error}): {fix}")

"""One doctor run: the shared facts read once, the families of checks side by side, all within a deadline.

Every external call has its own timeout (Slurm's commands, MUNGE, the store's connection, the
probe); the deadline bounds the whole: a family not done by then is reported as not answering,
and the run returns. Checks come back in a fixed order, so the output reads the same every time.
"""

from __future__ import annotations

import os
import pwd
import re
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from meta.serve.doctor import clock, identity, job_api, munge, partitions, slurm_config, store
from meta.serve.doctor.check import Check, fail
from meta.serve.doctor.conf_file import SlurmConf, read_slurm_conf
from meta.serve.doctor.inputs import DoctorInputs, slurm_runner
from meta.serve.doctor.slurm_config import SlurmFacts, running_value

T = TypeVar("T")
ORDER = ("slurm-conf", "slurmctld", "slurmdbd", "accounting-flags", "private-data", "job-submit",
         "managed-partitions", "munged", "munge-key", "daemon-user", "store", "clock", "job-api")  # fmt: skip
_USER_UID = re.compile(r"^(?P<name>[^()\s]+)\((?P<uid>\d+)\)$")  # SlurmUser = slurm(64030)


def run_checks(inputs: DoctorInputs) -> list[Check]:
    """run_checks runs every check within ``inputs.deadline_s`` and returns them in ORDER."""
    deadline = time.monotonic() + inputs.deadline_s
    runner = slurm_runner(inputs)
    conf, conf_error = _conf(inputs)
    pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="doctor")
    try:
        running = pool.submit(slurm_config.read_running, runner)
        clusters = pool.submit(slurm_config.read_clusters, runner)
        sdiag = pool.submit(clock.slurmctld_sample, runner)
        probed = pool.submit(store.probe_store, inputs.db_url)
        site_socket = munge.auth_socket(conf.get("AuthInfo") if conf else None)
        daemon_socket = inputs.settings.munge_socket
        trip = pool.submit(munge.round_trip, daemon_socket, daemon_socket)
        cross = pool.submit(munge.round_trip, site_socket, daemon_socket) if site_socket != daemon_socket else None
        address, why_none = job_api.job_api_address(inputs.settings)
        node = pool.submit(job_api.srun_probe, runner, address, inputs.probe_partition) if address else None

        facts = SlurmFacts(inputs.slurm_conf, conf, conf_error,
                           *_wait(running, deadline, (None, "scontrol did not answer in time")))  # fmt: skip
        who = identity.current_identity(*_slurm_user(facts))
        checks = _slurm_checks(facts, _wait(clusters, deadline, (None, "sacctmgr did not answer in time")),
                               identity.privileged(who))  # fmt: skip
        checks.append(partitions.job_submit_check(facts, lua := partitions.read_lua(inputs.slurm_conf.parent),
                                                  inputs.settings.managed_partitions))  # fmt: skip
        checks.append(partitions.managed_partitions_check(inputs.settings.managed_partitions, lua,
                                                          partitions.lua_enabled(facts), conf.partitions if conf else ()))  # fmt: skip
        checks += _munge_checks(daemon_socket, site_socket, trip, cross, deadline)
        checks.append(identity.daemon_user_check(who))
        state = _wait(probed, deadline, None)
        checks.append(store.store_check(state) if state else fail("store", "the store did not answer in time"))
        checks.append(_clock_check(_wait(sdiag, deadline, (None, "sdiag did not answer in time")), state))
        checks.append(_job_api_check(address, why_none, node, deadline))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # every call has its own timeout: stragglers end soon
    return sorted(checks, key=lambda check: ORDER.index(check.name) if check.name in ORDER else len(ORDER))


def _conf(inputs: DoctorInputs) -> tuple[SlurmConf | None, str | None]:
    """_conf reads slurm.conf first (a file: no wait); the families need its settings to start."""
    try:
        return read_slurm_conf(inputs.slurm_conf), None
    except OSError as exc:
        return None, exc.strerror or str(exc)


def _wait(future: Future[T], deadline: float, late: T) -> T:
    """_wait is the future's result, or ``late`` when the deadline passes first."""
    try:
        return future.result(timeout=max(0.0, deadline - time.monotonic()))
    except FutureTimeout:
        return late


def _slurm_user(facts: SlurmFacts) -> tuple[str | None, int | None]:
    """_slurm_user is SlurmUser's name and uid: slurmctld's ``name(uid)``, else the file's name looked up."""
    shown = running_value(facts.running, "SlurmUser")
    match = _USER_UID.match(shown or "")
    if match:
        return match.group("name"), int(match.group("uid"))
    name = facts.setting("SlurmUser") or "root"  # Slurm's default SlurmUser
    try:
        return name, pwd.getpwnam(name).pw_uid
    except KeyError:
        return name, None


def _slurm_checks(facts: SlurmFacts, clusters: tuple[list[str] | None, str | None], daemon_privileged: bool) -> list[Check]:
    """_slurm_checks are the checks over slurm.conf, slurmctld and slurmdbd."""
    return [
        slurm_config.slurm_conf_check(facts),
        slurm_config.slurmctld_check(facts),
        slurm_config.slurmdbd_check(facts, *clusters),
        slurm_config.accounting_flags_check(facts),
        slurm_config.private_data_check(facts, daemon_privileged),
    ]


def _munge_checks(daemon_socket: str | None, site_socket: str | None, trip: Future[munge.RoundTrip],
                  cross: Future[munge.RoundTrip] | None, deadline: float) -> list[Check]:  # fmt: skip
    """_munge_checks are the munged and key checks from their round trips."""
    late = munge.RoundTrip(encode_error="munged did not answer in time")
    checks = [munge.munged_check(daemon_socket, _wait(trip, deadline, late), os.geteuid())]
    crossed = _wait(cross, deadline, late) if cross is not None else None
    checks.append(munge.munge_key_check(daemon_socket, site_socket, crossed, munge.key_mode()))
    return checks


def _clock_check(sdiag: tuple[clock.ClockSample | None, str | None], state: store.StoreState | None) -> Check:
    """_clock_check compares slurmctld's clock and, for PostgreSQL, the store's with this host's."""
    samples: list[clock.ClockSample] = []
    missing: list[str] = []
    sample, why = sdiag
    if sample is not None:
        samples.append(sample)
    else:
        missing.append(why or "slurmctld")
    if state is not None and state.clock is not None:
        samples.append(state.clock)
    return clock.clock_check(samples, missing)


def _job_api_check(address: str | None, why_none: str | None, node: Future[tuple[job_api.ProbeResult | None, str | None]] | None,
                   deadline: float) -> Check:  # fmt: skip
    """_job_api_check probes from a node, and from this host when no node could be used."""
    result, srun_error = _wait(node, deadline, (None, "srun did not finish in time")) if node else (None, None)
    remaining = max(0.5, deadline - time.monotonic())  # the fallback probe stays within the deadline too
    local = job_api.local_probe(address, remaining) if address and result is None else None
    return job_api.job_api_check(address, why_none, result, srun_error, local)


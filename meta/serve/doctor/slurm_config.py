"""Slurm's configuration: slurm.conf readable, slurmctld and slurmdbd answering, job_comment, PrivateData.

The file (``--slurm-conf``) says what slurmctld loads at its next start; ``scontrol show config`` says
what it runs now. A setting metasched needs must be in both: missing from the file, it is lost at the
next restart; missing from the running controller, it is not in force until ``scontrol reconfigure``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from meta.serve.doctor.check import Check, fail, first_line, ok, warn
from meta.serve.doctor.conf_file import SlurmConf
from slurm_bridge.errors import SlurmError
from slurm_bridge.parse.config import config_values
from slurm_bridge.runner import CommandRunner

SLURMDBD_TYPE = "accounting_storage/slurmdbd"
DEFAULT_DBD_PORT = "6819"
# PrivateData flags that would hide from a daemon that is not root or SlurmUser what it reads
_HIDES_FROM_DAEMON = ("jobs", "users", "accounts", "usage")


@dataclass(frozen=True)
class SlurmFacts:
    """SlurmFacts are read once and shared by the Slurm checks: the file and the running configuration."""

    conf_path: Path
    conf: SlurmConf | None
    conf_error: str | None
    running: dict[str, str] | None
    running_error: str | None

    def setting(self, key: str) -> str | None:
        """setting is a value from the file when it was read, else from the running controller."""
        if self.conf is not None:
            return self.conf.get(key)
        return running_value(self.running, key)


def running_value(running: dict[str, str] | None, key: str) -> str | None:
    """running_value is ``scontrol show config``'s value of a key (any case), None for unset or ``(null)``."""
    if running is None:
        return None
    for name, value in running.items():
        if name.lower() == key.lower():
            return None if value in ("(null)", "") else value
    return None


def read_running(runner: CommandRunner) -> tuple[dict[str, str] | None, str | None]:
    """read_running asks slurmctld for its running configuration: (values, None) or (None, error)."""
    try:
        return config_values(runner.run("scontrol", ["show", "config"]).stdout), None
    except SlurmError as exc:
        return None, first_line(str(exc))


def flags(value: str | None) -> set[str]:
    """flags are a comma-separated setting's words, lower case, ``none`` dropped."""
    return {word.strip().lower() for word in (value or "").split(",") if word.strip() and word.strip().lower() != "none"}


def slurm_conf_check(facts: SlurmFacts) -> Check:
    """slurm_conf_check: slurm.conf can be read, and names partitions."""
    if facts.conf is None:
        return fail("slurm-conf", f"cannot read {facts.conf_path}: {facts.conf_error} "
                                  "(point --slurm-conf or SLURM_CONF at the site's slurm.conf)")  # fmt: skip
    if not facts.conf.partitions:
        return warn("slurm-conf", f"{facts.conf_path} defines no partition (PartitionName=): no job can run")
    return ok("slurm-conf", f"{facts.conf_path}: {len(facts.conf.partitions)} partitions")


def slurmctld_check(facts: SlurmFacts) -> Check:
    """slurmctld_check: slurmctld answers, and runs the cluster the file names."""
    if facts.running is None:
        return fail("slurmctld", f"slurmctld does not answer `scontrol show config` ({facts.running_error}): "
                                 f"start slurmctld, or fix SlurmctldHost in {facts.conf_path}")  # fmt: skip
    running_cluster = running_value(facts.running, "ClusterName")
    file_cluster = facts.conf.get("ClusterName") if facts.conf else None
    if file_cluster and running_cluster and file_cluster != running_cluster:
        return fail("slurmctld", f"{facts.conf_path} names cluster {file_cluster} but slurmctld runs {running_cluster}: "
                                 "point --slurm-conf at this cluster's slurm.conf")  # fmt: skip
    version = running_value(facts.running, "SLURM_VERSION")
    return ok("slurmctld", f"answers (cluster {running_cluster or '?'}" + (f", Slurm {version})" if version else ")"))


def accounting_flags_check(facts: SlurmFacts) -> Check:
    """accounting_flags_check: AccountingStoreFlags has job_comment, in the file and in the running controller."""
    why = "sacct then never shows --comment, where metasched tags each attempt (a lost launch cannot be looked up)"
    if facts.conf is not None:
        value = facts.conf.get("AccountingStoreFlags")
        if "job_comment" not in flags(value):
            return fail("accounting-flags", f"{facts.conf_path}: AccountingStoreFlags={value or '(unset)'} lacks "
                                            f"job_comment: {why}; add it and run `scontrol reconfigure`")  # fmt: skip
    running = running_value(facts.running, "AccountingStoreFlags")
    if facts.running is not None and "job_comment" not in flags(running):
        return fail("accounting-flags", f"slurmctld runs with AccountingStoreFlags={running or '(unset)'}, without "
                                        f"job_comment: {why}; run `scontrol reconfigure`")  # fmt: skip
    if facts.conf is None and facts.running is None:
        return fail("accounting-flags", "neither slurm.conf nor slurmctld could be read (see slurm-conf, slurmctld)")
    return ok("accounting-flags", "AccountingStoreFlags has job_comment: sacct keeps metasched's attempt tags")


def private_data_check(facts: SlurmFacts, daemon_privileged: bool) -> Check:
    """private_data_check: PrivateData hides nothing from the daemon; without ``jobs`` users see every job."""
    value = facts.setting("PrivateData")
    hidden = sorted(flags(value) & set(_HIDES_FROM_DAEMON))
    if hidden and not daemon_privileged:
        return fail("private-data", f"PrivateData={value} hides {', '.join(hidden)} from the daemon's user, which is "
                                    "not root or SlurmUser: run metasched serve as root")  # fmt: skip
    if "jobs" not in flags(value):
        return warn("private-data", f"PrivateData={value or 'none'}: every user reads all jobs' names, accounts and "
                                    "comments (metasched's attempt tags) with squeue, where metasched's API shows "
                                    "each user only their tenants' jobs; set PrivateData=jobs to match "
                                    "(the root daemon sees every job either way)")  # fmt: skip
    return ok("private-data", f"PrivateData={value}: users see their own jobs in Slurm; the root daemon sees all")


def read_clusters(runner: CommandRunner) -> tuple[list[str] | None, str | None]:
    """read_clusters asks slurmdbd (through sacctmgr) for the clusters it knows: (names, None) or (None, error)."""
    try:
        out = runner.run("sacctmgr", ["-n", "-P", "show", "cluster", "format=Cluster"]).stdout
    except SlurmError as exc:
        return None, first_line(str(exc))
    return [name.strip() for name in out.splitlines() if name.strip()], None


def slurmdbd_check(facts: SlurmFacts, clusters: list[str] | None, error: str | None) -> Check:
    """slurmdbd_check: accounting goes to slurmdbd, slurmdbd answers, and it knows this cluster."""
    storage = facts.setting("AccountingStorageType")
    if storage != SLURMDBD_TYPE:
        return fail("slurmdbd", f"AccountingStorageType={storage or '(unset)'}: metasched needs {SLURMDBD_TYPE} "
                                "(tenants are Slurm accounts; sacct finds lost launches)")  # fmt: skip
    host = facts.setting("AccountingStorageHost") or "(SlurmctldHost)"
    where = f"{host}:{facts.setting('AccountingStoragePort') or DEFAULT_DBD_PORT}"
    if clusters is None:
        return fail("slurmdbd", f"slurmdbd at {where} does not answer sacctmgr ({error}): start slurmdbd, or fix "
                                f"AccountingStorageHost/AccountingStoragePort in {facts.conf_path}")  # fmt: skip
    cluster = facts.setting("ClusterName")
    if cluster and cluster not in clusters:
        return fail("slurmdbd", f"slurmdbd at {where} does not know cluster {cluster} "
                                f"(it knows: {', '.join(clusters) or 'none'}): `sacctmgr add cluster {cluster}`")  # fmt: skip
    return ok("slurmdbd", f"answers at {where}" + (f"; cluster {cluster} registered" if cluster else ""))

"""The environment sbatch hands a job: what the daemon may pass on, never its store or its own settings.

sbatch exports its own environment into the job (``--export=ALL``, the default) and, with
``AccountingStoreFlags=job_env``, slurmdbd stores it. The daemon's environment may name its
store (``METASCHED_DB``, a PostgreSQL password), so every job gets a cleaned copy: no variable
that names or unlocks a store (by name, or by a value that is a database URL). The rendered
script sets the job's own ``METASCHED_*`` variables over whatever else came through.
A job that runs as another user gets a login-like environment of that user instead of the
daemon's (HOME, USER, LOGNAME, SHELL from the passwd database and a standard PATH), as if the
user had called sbatch from a shell — plus the daemon's locale and ``SLURM_CONF``, which sbatch
itself needs to reach the controller.
"""

from __future__ import annotations

import pwd
import re
from collections.abc import Mapping

from slurm_bridge.launch import RunAs

USER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # login.defs' ENV_SUPATH
# the store's address and credentials under their usual names (metasched's, libpq's, twelve-factor apps')
_STORE_VARIABLES = frozenset({
    "METASCHED_DB", "METASCHED_DB_FILE", "DATABASE_URL", "PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE", "PGSERVICE",
})  # fmt: skip
_DATABASE_URL = re.compile(r"\s*(postgres(ql)?|sqlite|mysql|mariadb|oracle|mssql|cockroachdb)(\+\w+)?://", re.I)
# SLURM_CONF: sbatch finds the controller through it (a head whose slurm.conf is not /etc/slurm's,
# as deploy/site's heads); it never reaches the job: slurmd sets the job's SLURM_CONF to its own file
_KEPT_FOR_USERS = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "SLURM_CONF")


def is_private(name: str, value: str) -> bool:
    """is_private tells whether a daemon variable must never reach a job: it names or unlocks a store."""
    return name in _STORE_VARIABLES or _DATABASE_URL.match(value) is not None


def submission_env(daemon_env: Mapping[str, str], run_as: RunAs | None) -> dict[str, str]:
    """submission_env is sbatch's environment for one job: the daemon's without private variables, or the user's."""
    if run_as is None:
        return {name: value for name, value in daemon_env.items() if not is_private(name, value)}
    env = {name: daemon_env[name] for name in _KEPT_FOR_USERS if name in daemon_env}
    env["PATH"] = USER_PATH
    try:
        entry = pwd.getpwuid(run_as.uid)
    except KeyError:
        return env  # no passwd entry: sbatch refuses such a uid itself, in its words
    env.update(HOME=entry.pw_dir, USER=entry.pw_name, LOGNAME=entry.pw_name, SHELL=entry.pw_shell or "/bin/sh")
    return env

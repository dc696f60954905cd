"""The daemon's user: root, with the capabilities it uses to act as the jobs' users.

``sbatch --uid/--gid`` (every job runs as its submitter) is root's only: Slurm 22.05 answers
anyone else, SlurmUser included, ``--uid only permitted by root user``. The daemon also reads and
writes users' output folders in children that drop to the owner (CAP_SETUID, CAP_SETGID for
their groups) and kills a child that outlives its cap (CAP_KILL: it runs as another uid). The
doctor checks the user it runs as: run it as the daemon runs (``systemd-run -p User=...`` or the
unit's own sandbox).
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from meta.serve.doctor.check import Check, fail, ok

# capability numbers (linux/capability.h) the daemon uses, and why
NEEDED_CAPS: dict[str, tuple[int, str]] = {
    "CAP_SETGID": (6, "output work runs with the job owner's groups"),
    "CAP_SETUID": (7, "output work runs as the job owner"),
    "CAP_KILL": (5, "a stuck output worker (the owner's uid) is killed"),
}


@dataclass(frozen=True)
class Identity:
    """Identity is who the doctor (as the daemon) runs as: uid, name, effective capabilities, Slurm's SlurmUser."""

    euid: int
    user: str
    cap_eff: int | None  # /proc/self/status CapEff; None where it cannot be read
    slurm_user: str | None
    slurm_uid: int | None


def user_name(uid: int) -> str:
    """user_name names a uid from the passwd database (``uid<N>`` without an entry)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid{uid}"


def read_cap_eff(status: Path = Path("/proc/self/status")) -> int | None:
    """read_cap_eff is this process's effective capability mask, None where /proc cannot tell."""
    try:
        for text_line in status.read_text().splitlines():
            if text_line.startswith("CapEff:"):
                return int(text_line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        return None
    return None


def current_identity(slurm_user: str | None, slurm_uid: int | None) -> Identity:
    """current_identity is this process's identity (I/O: the passwd database, /proc)."""
    euid = os.geteuid()
    return Identity(euid, user_name(euid), read_cap_eff(), slurm_user, slurm_uid)


def privileged(identity: Identity) -> bool:
    """privileged tells whether Slurm shows this user every job and association (root or SlurmUser)."""
    return identity.euid == 0 or (identity.slurm_uid is not None and identity.euid == identity.slurm_uid)


def daemon_user_check(identity: Identity) -> Check:
    """daemon_user_check: the daemon runs as root, with the capabilities it uses to act as users."""
    who = f"{identity.user} (uid {identity.euid})"
    if identity.euid != 0:
        slurm_user = identity.slurm_uid is not None and identity.euid == identity.slurm_uid
        role = "SlurmUser, which Slurm 22.05 refuses `sbatch --uid` (`--uid only permitted by root user`)" if slurm_user \
            else "not root"
        return fail("daemon-user", f"runs as {who}, {role}: metasched serve runs as root so that every job runs "
                                   "as its submitter (sbatch --uid --gid); run it (and this check) as root")  # fmt: skip
    if identity.cap_eff is not None:
        missing = [name for name, (bit, _) in NEEDED_CAPS.items() if not identity.cap_eff >> bit & 1]
        if missing:
            why = "; ".join(f"{name}: {NEEDED_CAPS[name][1]}" for name in missing)
            return fail("daemon-user", f"root without {', '.join(missing)} ({why}): add them to the unit's "
                                       "CapabilityBoundingSet")  # fmt: skip
    return ok("daemon-user", f"runs as {who}, with {', '.join(NEEDED_CAPS)}: jobs are submitted as their users")

"""A job's submitting environment is its owner's: who else sees a stored spec sees it without ``env``.

msbatch sends the shell's environment (``--export=ALL``), which holds whatever the user's shell
held (tokens, keys). Slurm shows a job's environment and batch script to its owner and to
operators and administrators only (measured on Slurm 22.05: ``scontrol write batch_script`` is
refused to a co-member and to the account's coordinator; ``sacct --env-vars`` does answer the
coordinator, and metasched keeps to the stricter rule) (issue 22, S7): co-members and coordinators
see how many variables there were, never their names or values.
"""

from __future__ import annotations

from typing import Any

HIDDEN_KEY = "env_hidden"  # how many variables were hidden: the view says something was there


def without_env(spec: dict[str, Any]) -> dict[str, Any]:
    """without_env is the stored spec with its environment replaced by the number of variables hidden."""
    env = spec.get("env")
    if not env:
        return spec
    return {**spec, "env": {}, HIDDEN_KEY: len(env) if isinstance(env, dict) else 0}

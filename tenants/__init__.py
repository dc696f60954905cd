"""tenants: who is calling, and what each tenant and user may do; tenants are Slurm accounts.

Authentication by MUNGE (``auth``, ``credential``, ``munge``, with ``libmunge`` through ctypes
and ``munge_command`` as the fallback), identities and rights from Slurm's associations read with
``sacctmgr`` (``associations``, ``identity``: docs/identity.md §4), tenant administration of
weights, guarantees and limits (``quotas``), tenant secrets kept in files by name (``secrets``)
and the checks of names that arrive from users (``names``). It imports ``meta.model``,
``meta.store`` and ``slurm_bridge`` (for ``sacctmgr``).
"""

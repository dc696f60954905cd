"""meta.serve.doctor: ``metasched doctor``, the site's prerequisites checked one by one, each saying what to fix.

One module per family of checks (``munge``, ``slurm_config``, ``partitions``, ``store``, ``clock``,
``job_api``, ``identity``). Each decides in pure functions over what was read (tested with canned
inputs in tests/unit/test_doctor_*.py) and reads at its edge: Slurm through ``slurm_bridge``'s
command runner (argv lists with timeouts), MUNGE through ``tenants``, the store through
``meta.store``. ``run.py`` gathers the facts several families share and runs the families side by
side within one deadline.
"""

"""meta.sim: the trace-driven discrete-event simulator that drives the real policy code.

A trace (``trace``) replayed on a simulated cluster (``cluster``, ``presets/``) by an event loop
(``engine``) that builds the policy's snapshot, calls ``schedule`` as the daemon does and applies
the plan; usage is charged as the daemon charges it (``usage_ledger``) and submits pass the API's
limits (``admission``). ``run``, ``report``, ``metrics``, ``fairness`` and ``plot`` make the
figures; several Slurm clusters (``split``, ``outages``, ``routing``, ``federation``, ``multicluster``)
are issue 26's; meta/sim/README.md has the modelling choices. It never imports the store, the cycle or
Slurm.
"""

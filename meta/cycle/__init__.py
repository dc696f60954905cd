"""meta.cycle: the daemon's loop (``daemon.py``) and its period's numbered steps, a module or a package each.

``daemon.py``'s docstring is the one numbering; each step's module (a package's ``__init__``) opens
with "Cycle step N, name: ...". Helpers of a step live in its package; ``metrics.py`` (the
Prometheus families) and ``invariants.py`` (I1–I6, for tests and checks) belong to no step.
"""

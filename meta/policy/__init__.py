"""meta.policy: the pure scheduling policy, ``schedule(snapshot, config) -> Plan``, with no I/O.

The scheduler (``scheduler``) orders the waiting tasks (``ordering``, ``fairshare``, priority and
aging), admits them against quotas (``quota``), filters and scores nodes (``feasibility``,
``placement``, ``gang``, ``equivalence``), preempts by checkpoint cost (``preemption``), backfills
around held starts (``backfill``) and gives every waiter a typed reason (``explain``); its inputs
and output are ``snapshot`` and ``plan``, its knobs ``config`` (``SchedulerConfig``). Also here,
because the daemon, the API and the simulator must apply them alike: the ``fifo`` and
``slurmlike`` baselines, dependency rules (``dependencies``), submit limits (``admission``), the
usage charge (``usage_charge``) and the decision records (``decisions``, ``recorder``). It
imports only ``meta.model``.
"""

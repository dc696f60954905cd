"""slurm_bridge: everything that speaks Slurm (22.05 and later) for metasched.

Modules, one concept each:

- ``runner``: run a Slurm CLI as an argv list with a timeout; typed errors; a record per call.
- ``classify``: which failure messages mean rejected, transient or unknown outcome.
- ``errors``: ``SlurmRejected``, ``SlurmTransient``, ``SlurmUnknownOutcome``, ``SlurmFailed``, ...
- ``call_records``: ``CallRecord`` (one command call: latency, outcome), the ``CallObserver`` protocol, ``CallCounter``.
- ``client``: the ``SlurmClient`` protocol; ``commands.CliSlurmClient`` is the default implementation.
- ``faults``: ``FaultInjectingClient`` for tests (drop, reject, timeout before / after delegating).
- ``fake``: ``FakeSlurm``, the in-memory ``SlurmClient`` (jobs, nodes, accounting, queued faults) tests and benchmarks drive.
- ``pyslurm_adapter``: optional stub; refuses unless a matching pyslurm is importable.
- ``parse.*``: pure parsers (squeue ``--Format`` text and ``--json``, sinfo ``--json``, ``sacct -P``, ``scontrol -o``, topology, sdiag).
- ``hostlist``: ``a100n[1-2],t4n1`` expand / compress.
- ``states``: Slurm job state -> ``Outcome`` + ``FailureCategory``.
- ``attempt_outcome``: Slurm records grouped by attempt, a het-job's components folded into one outcome.
- ``inventory``: sinfo + topology -> ``NodeState``s, inventory version, ``NodeUsage``.
- ``tags``: job name / comment that carry the attempt id and fencing token.
- ``launch`` + ``render``: ``LaunchRequest`` -> sbatch script.
- ``reservations``: head-of-line holds, planned and applied idempotently by name.
"""

"""checkpoint: what a job keeps across attempts and what it leaves behind, fenced by its attempt.

The checkpoint registry (``registry``: training jobs report checkpoints, a new attempt resumes
from the last), the checkpoint policy (``policy``: Young/Daly interval, what a preemption costs),
inference outputs committed exactly once per partition (``manifest``, ``manifest_files``), the
fencing of writes from inside a running job (``fencing``) and the per-attempt secret a job proves
itself with (``attempt_secret``). It imports only ``meta.model`` and ``meta.store``; the API
service and the daemon call it, never the other way round.
"""

"""Cycle step 13, actuate: new attempts launched through the launch pool, stops sent (``actuator.py``).

The pool (``launch_pool.py``) runs the launch protocol behind the period, in the policy's order,
one tenant per round (``launch_order.py``); ``launch_plan.py``, ``sbatch_launch.py`` and
``array_launch.py`` turn a stored attempt into a LaunchRequest. The package also holds step 12,
holds (``holds.py``): Slurm reservations for the plan's held head-of-line gangs.
"""

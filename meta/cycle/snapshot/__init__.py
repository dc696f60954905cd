"""Cycle step 7, snapshot: one consistent read of pending tasks, live attempts and tenants (``build.py``).

The waiting tasks (``pending_view.py``) and the live attempts (``live_view.py``) are described
once and again only when they change. The package also holds step 8, gates (``gates.py``): held,
dependent and not-yet-begun jobs wait before the policy, with their reason.
"""

"""Cycle step 11, apply: the plan committed in one fenced transaction, capacity re-checked (``transaction.py``).

In the same transaction: the waiting tasks' reasons, written only when they change
(``reasons.py``), and the plan's decisions, appended to the bounded decision log (``decision_log.py``).
"""

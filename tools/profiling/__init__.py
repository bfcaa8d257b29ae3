"""Profiles: read jax.profiler traces and XLA HLO dumps, summarize them, diff two of them.

Pure readers (``hlo``, ``trace``) turn files into records; ``summary`` and ``diff`` turn records into
data and markdown. jax and xprof are imported lazily, inside the functions that need them.
"""

"""Keeping PySpark's per-task garbage collection cheap in Herald's Python workers.

PySpark's daemon runs ``gc.collect()`` in a reused Python worker after *every*
task (``pyspark/daemon.py``). A full collection walks every tracked object, and a
worker that has imported pyspark, pyarrow, numpy and Herald holds ~90 k of them
that never become garbage (modules, classes, functions): ≈ 80–150 ms per task on
our 2-core machine, measured with ``py-spy`` on the stream read (``gc.collect``
was a quarter of the read workers' samples) — paid again before the worker can
start its next task, so every micro-batch's tasks wait for it.

`freeze_imports` runs once per process, at the start of a task: it collects what
is garbage now and moves everything left into the permanent generation
(``gc.freeze``), which later collections skip. Objects created by tasks are
collected as before; only what exists at the first task's start — imports and
module state — is never examined again (it lives as long as the process anyway).
"""

from __future__ import annotations

import gc
import os

__all__ = ["freeze_imports"]

_frozen_pid = 0


def freeze_imports() -> None:
    """Freeze this process's objects out of future collections, once per process
    (a forked worker re-freezes: its pid differs from its parent's)."""
    global _frozen_pid
    pid = os.getpid()
    if _frozen_pid == pid:
        return
    gc.collect()
    gc.freeze()
    _frozen_pid = pid

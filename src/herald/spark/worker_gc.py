"""Keeping PySpark's per-task garbage collection cheap in Herald's Python workers.

PySpark's daemon runs ``gc.collect()`` in a reused Python worker after *every*
task (``pyspark/daemon.py``) — and every Python process Spark forks from a daemon
is such a worker: the executors' read and write tasks, but also the driver-side
ones that unpickle format ``herald`` once per job or micro-batch (the planner
that builds the writer, ``write_into_data_source``; the sink's commit runners,
``commit_data_source_write`` and ``python_streaming_sink_runner``; the read
planner). A full collection walks every tracked object, and a process that has
imported pyspark, pyarrow, numpy and Herald holds ~90 k of them that never
become garbage (modules, classes, functions): ≈ 80–150 ms per task on our
2-core machine. Measured with ``py-spy`` over the whole process tree: on the
stream read ``gc.collect`` was a quarter of the read workers' samples; on the
batch sink, before the driver-side processes froze too, the writer planner and
the commit runner spent ≈ 0.15 s each in it per job (µs-per-row CPU of the two
≈ 0.34 against the tasks' 0.7) and the streaming sink runner ≈ 40 ms per
micro-batch, CPU taken from the next batch on two cores.

`freeze_imports` runs at the start of each such call. The first time in a
process it collects what is garbage now and moves everything left into the
permanent generation (``gc.freeze``), which later collections skip. Later calls
only freeze again (O(1): the generations' lists are spliced): what survived the
previous task — modules and clients' state imported or built lazily inside it —
already outlived the daemon's collection after that task, so it is process state,
not garbage. Objects created by the current task are collected as before.
"""

from __future__ import annotations

import gc
import os

__all__ = ["freeze_imports"]

_frozen_pid = 0


def freeze_imports() -> None:
    """Freeze this process's objects out of future collections: a collection first
    on the first call per process (a forked worker's pid differs from its parent's),
    a bare freeze of what survived earlier tasks on later calls."""
    global _frozen_pid
    pid = os.getpid()
    if _frozen_pid != pid:
        gc.collect()
        _frozen_pid = pid
    gc.freeze()

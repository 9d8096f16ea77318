"""Killing a process group for good: a Spark driver (its JVM and Python workers), a
Spark worker, a pipeline started with ``start_new_session=True``.

Killing only the leader leaves a JVM that still holds a checkpoint's state or a
port, and the next driver then meets it: crash tests ``kill -9`` the whole group
and wait, by deadline, until nothing of it runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from herald.testing.waiting import wait_until

__all__ = ["group_running", "kill_group"]


def group_running(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (zombies aside)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it exited while we looked
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def kill_group(proc: subprocess.Popen, deadline_s: float = 60) -> None:
    """``kill -9`` the group ``proc`` leads; return once none of it runs."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # the whole group is gone already
        pass
    proc.wait(30)
    wait_until(lambda: not group_running(proc.pid), f"process group {proc.pid} gone", deadline_s)

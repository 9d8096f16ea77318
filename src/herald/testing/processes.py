"""Killing a process group for good: a Spark driver (its JVM and Python workers), a
Spark worker, a pipeline started with ``start_new_session=True``.

Killing only the leader leaves a JVM that still holds a checkpoint's state or a
port, and the next driver then meets it: crash tests ``kill -9`` the whole group
and wait, by deadline, until nothing of it runs. `DriverProcess` is the one
wrapper every driver crash test starts its drivers with.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from herald.testing.diagnose import explain_group
from herald.testing.waiting import wait_until

__all__ = ["DriverProcess", "group_running", "kill_group"]


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


class DriverProcess:
    """``python -m <module> <args>`` — a Spark driver — in its own process group, so
    ``kill -9`` takes its JVM and Python workers with it.

    Its stdout is drained by a thread into ``log_path`` (stderr goes there directly)
    and into a queue, so a crash test can block on the driver's next ``batch …``
    line rather than sleep. Every failure message carries the log's tail: a driver
    that died in a CI run leaves nothing else behind; a deadline that passes also
    says what the driver was doing (`herald.testing.diagnose`: its Python stacks,
    its JVM's query threads, the batches below ``checkpoint`` planned and committed).
    """

    def __init__(self, module: str, args: list[str], log_path: Path, checkpoint: Path | None = None) -> None:
        self.log_path = log_path
        self.checkpoint = checkpoint
        self._log = open(log_path, "ab")  # noqa: SIM115 — open as long as the driver runs.
        self.proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE,
                                     stderr=self._log, start_new_session=True,
                                     env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
        self.lines: queue.Queue[str] = queue.Queue()
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        """Copy stdout to the log (flushed per line: tests read the log for progress)
        and to ``lines``; an empty string marks its end."""
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self._log.write(raw)
            self._log.flush()
            self.lines.put(raw.decode(errors="replace"))
        self.lines.put("")

    def wait_for_line(self, prefix: str, deadline_s: float) -> str:
        """The driver's next stdout line starting with ``prefix`` (say ``"batch "``);
        fails with the log's tail if the driver exits or the deadline passes first."""
        end = time.monotonic() + deadline_s
        while (left := end - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line.startswith(prefix):
                return line
            if line == "":
                raise AssertionError(f"driver exited ({self.proc.wait()}) before a {prefix!r} line:\n"
                                     f"{self.log_tail()}")
        raise AssertionError(f"no {prefix!r} line from the driver in {deadline_s}s:\n{self.log_tail()}\n"
                             f"what the driver is doing:\n{self.explain()}")

    def explain(self) -> str:
        """Where the driver is (a hang's diagnosis, `herald.testing.diagnose.explain_group`)."""
        if not self.is_running():
            return f"(it exited {self.proc.returncode})"
        return explain_group(self.proc.pid, self.checkpoint)

    def wait_for_batch_line(self, deadline_s: float) -> str:
        """The next ``batch …`` progress line: the driver is up and processing."""
        return self.wait_for_line("batch ", deadline_s)

    def log_tail(self, lines: int = 60) -> str:
        """The end of the driver's log, for a failure message."""
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def is_running(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        """Send ``sig`` (SIGSTOP, SIGCONT, …) to the whole group."""
        os.killpg(self.proc.pid, sig)

    def wait(self, deadline_s: float) -> int:
        """The driver's exit code, once its last stdout line is in the log (a test
        reads the log for why it exited)."""
        code = self.proc.wait(deadline_s)
        self._drainer.join(deadline_s)
        return code

    def kill(self) -> None:
        """``kill -9`` the whole group and return once none of it runs: the next
        driver must not meet this one's JVM still holding the checkpoint's state."""
        kill_group(self.proc)

    def kill_if_running(self) -> None:
        """For a test's ``finally``: never leave a driver (or its JVM) behind. A
        stopped group is continued first, so it can die and be reaped."""
        if self.is_running():
            self.signal(signal.SIGCONT)
            self.kill()

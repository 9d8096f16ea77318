"""Helper threads started on demand and fed through a C ``SimpleQueue``.

The broker hands blocking calls to threads many times per group commit (a data
fdatasync beside a commit line's, a replicating primary's local sync). A
`concurrent.futures` executor costs each call a `Future` (a `Condition` and its
lock), a work item and an idle-thread `Semaphore`: a dozen Python-level lock
operations, each competing with the event loop for the GIL. Here a job is a tuple
on a ``SimpleQueue``; threads start as jobs outnumber them, up to a maximum, and
then idle on the queue. Subclasses say what a job does (`_run`) and how its
outcome reaches the caller (`_finish`):

    class Syncs(HelperThreads[tuple[int, PendingSync]]):
        def _run(self, job): ...      # on a helper thread: the blocking call
        def _finish(self, job, outcome): ...  # still there: hand the outcome over

Used by `herald.fragment.fdatasyncs`, `herald.broker.loop_threads` and
`herald.broker.sync_rounds` (one thread, stopped with its broker's loop).
"""

from __future__ import annotations

import queue
import threading
from typing import Generic, TypeVar

__all__ = ["HelperThreads"]

Job = TypeVar("Job")


class HelperThreads(Generic[Job]):
    """A pool of helper threads started on demand (see the module doc). Thread-safe."""

    def __init__(self, max_threads: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()  # None: a thread's end
        self._lock = threading.Lock()
        self._threads = self._outstanding = 0
        self._max_threads = max_threads
        self._name = name

    def _submit(self, job: Job) -> None:
        """Queue ``job``, starting a thread if every one is busy and there is room."""
        with self._lock:
            self._outstanding += 1
            if self._outstanding > self._threads and self._threads < self._max_threads:
                self._threads += 1
                threading.Thread(target=self._serve, name=f"{self._name}_{self._threads}", daemon=True).start()
        self._jobs.put(job)

    def stop(self) -> None:
        """End every thread once the jobs queued before this call are done."""
        with self._lock:
            for _ in range(self._threads):
                self._jobs.put(None)
            self._threads = 0

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            outcome = self._run(job)
            with self._lock:  # before the caller hears: its next job must not find this one outstanding
                self._outstanding -= 1
            self._finish(job, outcome)
            del job, outcome  # hold nothing of a finished job while idle

    def _run(self, job: Job) -> object:
        """The blocking work, on a helper thread; must not raise (return the error)."""
        raise NotImplementedError

    def _finish(self, job: Job, outcome: object) -> None:
        """Hand ``outcome`` to whoever waits for ``job`` (on the helper thread)."""
        raise NotImplementedError

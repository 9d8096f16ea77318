"""fdatasyncs handed to helper threads with as little Python as possible.

A sync round (`herald.fragment.rounds`) starts a group's data fdatasync on
another thread so that it runs beside the commit line's. A
`concurrent.futures` executor did that with a `Future` (a `Condition` and an
`RLock`), a work item and an idle-thread `Semaphore` per call — a dozen
Python-level lock operations, each competing with the event loop for the GIL,
for a call that then sleeps in the kernel. Here a job is a tuple on a C
``SimpleQueue`` and its completion a C lock released once:

    sync = SYNCS.fdatasync(fd)      # returns at once; the helper syncs ``fd``
    ...
    error = sync.exception()        # waits; None, or the OSError it raised

Threads start on demand up to `MAX_THREADS` (a round of many journals on a file
system where syncfs is not trusted needs two syncs per journal at once) and then
idle on the queue. The caller keeps ``fd`` open until ``exception()`` returned.
"""

from __future__ import annotations

import os
import queue
import threading

__all__ = ["MAX_THREADS", "SYNCS", "PendingSync", "SyncHelpers"]

MAX_THREADS = 32


class PendingSync:
    """One fdatasync under way; `exception` waits for it."""

    __slots__ = ("_done", "error")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()
        self.error: OSError | None = None

    def exception(self) -> OSError | None:
        """Wait for the sync; the OSError it raised, or None (as `Future.exception`)."""
        self._done.acquire()
        self._done.release()
        return self.error

    def _finish(self, error: OSError | None) -> None:
        self.error = error
        self._done.release()


class SyncHelpers:
    """Helper threads running fdatasyncs (see the module doc). Thread-safe."""

    def __init__(self, max_threads: int = MAX_THREADS, name: str = "herald-fdatasync") -> None:
        self._jobs: queue.SimpleQueue[tuple[int, PendingSync]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._outstanding = 0
        self._max_threads = max_threads
        self._name = name

    def fdatasync(self, fd: int) -> PendingSync:
        """Start ``os.fdatasync(fd)`` on a helper thread."""
        sync = PendingSync()
        with self._lock:
            self._outstanding += 1
            if self._outstanding > self._threads and self._threads < self._max_threads:
                self._threads += 1
                threading.Thread(target=self._serve, name=f"{self._name}_{self._threads}", daemon=True).start()
        self._jobs.put((fd, sync))
        return sync

    def _serve(self) -> None:
        while True:
            fd, sync = self._jobs.get()
            error: OSError | None = None
            try:
                os.fdatasync(fd)
            except OSError as err:
                error = err
            with self._lock:
                self._outstanding -= 1
            sync._finish(error)
            del fd, sync, error


SYNCS = SyncHelpers()

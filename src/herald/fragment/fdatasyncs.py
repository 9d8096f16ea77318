"""fdatasyncs handed to helper threads with as little Python as possible.

A sync round (`herald.fragment.rounds`) starts a group's data fdatasync on
another thread so that it runs beside the commit line's. A
`concurrent.futures` executor did that with a `Future` (a `Condition` and an
`RLock`), a work item and an idle-thread `Semaphore` per call — a dozen
Python-level lock operations, each competing with the event loop for the GIL,
for a call that then sleeps in the kernel. Here a job is a tuple on a C
``SimpleQueue`` (`herald.helper_threads`) and its completion a C lock released once:

    sync = SYNCS.fdatasync(fd)      # returns at once; the helper syncs ``fd``
    ...
    error = sync.exception()        # waits; None, or the OSError it raised

Threads start on demand up to `MAX_THREADS` (a round of many journals on a file
system where syncfs is not trusted needs two syncs per journal at once) and then
idle on the queue. The caller keeps ``fd`` open until ``exception()`` returned.
"""

from __future__ import annotations

import os
import threading

from herald.helper_threads import HelperThreads

__all__ = ["MAX_THREADS", "SYNCS", "PendingSync", "SyncAverage", "SyncHelpers", "fdatasync_twice"]

MAX_THREADS = 32
#: fdatasyncs that average more than this are on a contended disk (`SyncAverage.slow`)
#: until they average under half of it again, and how much each sync weighs in that
#: running average.
SLOW_SYNC_S = 0.001
SYNC_AVERAGE_WEIGHT = 1 / 64


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


class SyncHelpers(HelperThreads[tuple[int, PendingSync]]):
    """Helper threads running fdatasyncs (see the module doc). Thread-safe."""

    def __init__(self, max_threads: int = MAX_THREADS, name: str = "herald-fdatasync") -> None:
        super().__init__(max_threads, name)

    def fdatasync(self, fd: int) -> PendingSync:
        """Start ``os.fdatasync(fd)`` on a helper thread."""
        sync = PendingSync()
        self._submit((fd, sync))
        return sync

    def _run(self, job: tuple[int, PendingSync]) -> OSError | None:
        try:
            os.fdatasync(job[0])
        except OSError as err:
            return err
        return None

    def _finish(self, job: tuple[int, PendingSync], outcome: object) -> None:
        job[1]._finish(outcome)  # type: ignore[arg-type]


SYNCS = SyncHelpers()


class SyncAverage:
    """A running average of a commit log's fdatasync durations, and whether they are slow.

    Slow syncs mean a disk (and, with it, CPUs) shared with busy neighbours. There,
    one fdatasync at a time returned later than two at once (raw 1 KiB records,
    load 8-10, interleaved: one, issued by the busy thread, mean 2.3-2.7 ms, p50
    1.4-2.4; a spool's data and commit line synced side by side mean 0.66-0.71, p50
    0.15-0.17), so a lone writer's round is synced in place rather than logged
    (`herald.fragment.commit_log.CommitLog.takes_lone`), and its round's time is
    added here (`herald.fragment.rounds.write_round`) until the average falls under half of
    `SLOW_SYNC_S`: with one threshold, the quicker in-place rounds alone would
    send the lone writer back to the log and the rounds would switch back and
    forth. Not thread-safe: one writer (the sync round thread)."""

    __slots__ = ("seconds", "slow")

    def __init__(self) -> None:
        self.seconds = 0.0
        self.slow = False

    def add(self, seconds: float) -> None:
        average = self.seconds = self.seconds + (seconds - self.seconds) * SYNC_AVERAGE_WEIGHT
        if average > SLOW_SYNC_S:
            self.slow = True
        elif average < SLOW_SYNC_S / 2:
            self.slow = False


def fdatasync_twice(fd: int) -> None:
    """``os.fdatasync(fd)`` here and, at the same time, on a helper thread; returns
    once both did, raising the first error either met (both calls share one open
    file, so the kernel may report a failed write-back to one of them only).

    On this machine's virtual disk, under neighbours' load, one fdatasync alone
    returned later than the same fdatasync issued twice at once (36 KiB records
    at a preallocated file's end, interleaved blocks, load ~15: alone mean
    1.0-2.1 ms, p50 0.38-0.63; twice mean 0.59-1.12, p50 0.19-0.26), as
    `SyncAverage` notes for a spool's two syncs. The mechanism is not known; the
    cost is a helper's wake-up and a second flush (~1.5-3 us of CPU per append at
    16 journals x 2 appends a round), so the commit log does this only while its
    syncs average slow (`SyncAverage.slow`) and for rounds of several groups."""
    beside = SYNCS.fdatasync(fd)
    try:
        os.fdatasync(fd)
    finally:
        failed = beside.exception()  # waited for in every case: the caller may close ``fd`` next
    if failed is not None:
        raise failed

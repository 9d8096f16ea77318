"""Ownership of a broker's ``--data-dir``: one process at a time [I-OWN-1].

Two brokers over one data dir would each take the other's spools: the first could no
longer read what it acknowledged, and neither could persist cleanly. The owner holds an
exclusive ``flock`` on ``<data-dir>/LOCK`` for its whole life; the kernel drops it when
the process dies, even by ``kill -9``, so a stale file never blocks a restart. The file
holds the owner's pid, so a refused broker can name the one in its way.

The owner also owns the data dir's commit log (`herald.fragment.commit_log`): taking
the lock replays what the last run logged into its spools, before any journal
recovers them, and opens this run's log as ``commit_log``, which the broker hands to
each journal it opens (and they to their spools): nothing finds it by path. It
then sweeps what a crash left half-done in the spool files kept for reuse
(`herald.fragment.spool_recycling.sweep`), before any journal creates a spool.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from herald.broker.metrics import METRICS
from herald.durable import make_durable_dirs
from herald.fragment.commit_log import LONE_BYTES, CommitLog
from herald.fragment.spool_recycling import sweep
from herald.protocol.errors import HeraldError, Status

LOCK_NAME = "LOCK"


class DataDirLock:
    """An exclusive lock on a data dir. ``acquire`` raises if another process owns it."""

    def __init__(self, data_dir: Path, *, lone_append_bytes: int = LONE_BYTES):
        self.path = Path(data_dir) / LOCK_NAME
        self.lone_append_bytes = lone_append_bytes  # the commit log's (``--lone-append-bytes``)
        self._fd = -1
        self.commit_log: CommitLog | None = None

    def acquire(self) -> DataDirLock:
        """Take the lock or raise NOT_ALLOWED naming the owner's pid. Blocks briefly
        on the file system only; never waits for the other owner."""
        try:
            make_durable_dirs(self.path.parent)  # spools and the keyspace live under it
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise HeraldError(Status.INVALID_ARGUMENT,
                              f"cannot use --data-dir {self.path.parent}: {err.strerror}", "data_dir") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise HeraldError(Status.NOT_ALLOWED,
                              f"--data-dir {self.path.parent} is in use by another broker (pid {owner}); "
                              "stop it or choose another --data-dir", "data_dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        self.commit_log = CommitLog.open(self.path.parent, _count_syncs, lone_bytes=self.lone_append_bytes)
        sweep(self.path.parent / "spools")  # journals' spool directories: herald.broker.journal
        return self

    def release(self) -> None:
        """Drop the lock (at clean shutdown; the kernel does it on any exit)."""
        if self.commit_log is not None:
            self.commit_log.close()
            self.commit_log = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _count_syncs(kind: str, n: int) -> None:
    """The commit log's syncs, in the broker's sync metrics (the bench reports them)."""
    (METRICS.syncfs if kind == "syncfs" else METRICS.fdatasyncs).inc(n)

"""The commit log's helper thread: checkpoints, spool write-back, segment growth.

The sync round thread (`herald.fragment.rounds`) holds every append of a round
while it works, so whatever the commit log (`herald.fragment.commit_log`) can do
ahead of time or after the fact runs here instead, one job at a time:

- a checkpoint: every spool and commits file a sealed segment's records went to is
  made durable, then the segment is deleted (`checkpoint`);
- a write-back hint: the kernel starts writing a spool chunk that only the log
  made durable (`herald.fragment.writeback`), so a checkpoint finds little dirty;
- growing the current segment before the round thread reaches its end: zeros
  written and fsync'd on a round took 2-39 ms, measured under load.
- deferred commit lines: a logged round's lines, written to their commits files
  in batches (`write_lines`), always before the checkpoint that syncs them;
- the next segment, made whole ahead of time in a file of its own (`zeroed_file`).

    worker = LogWorker()
    worker.submit(functools.partial(checkpoint, data_dir, segment, directories, count))
    worker.stop()  # runs what was submitted first

Blocking; jobs report their own errors (a failed job never stops the thread).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

from herald.durable import fsync_directory
from herald.fragment.syncfs import syncfs, syncs_whole_file_system
from herald.fragment.whole_writes import pwrite_all
from herald.fragment.writeback import WRITEBACK_BYTES, chunks_completed, write_back_range, written_back

__all__ = ["LogWorker", "checkpoint", "syncfs_of", "write_back_file", "room_for", "write_lines", "write_zeros",
           "zeroed_file"]

log = logging.getLogger(__name__)

#: From this many spool directories, a checkpoint syncs the whole file system in one
#: ``syncfs`` (where trusted) instead of an fsync per file. Below it, fsyncs of
#: files whose write-back was started as they grew cost little, and a syncfs would
#: also wait for every other process's dirty data on that file system.
SYNCFS_MIN_DIRECTORIES = 64


class LogWorker:
    """One thread running submitted jobs in order, started on the first job."""

    def __init__(self, name: str = "herald-commit-log") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def submit(self, job: Callable[[], object]) -> None:
        """Run ``job`` after those submitted before it; dropped once stopped."""
        if self._stopped:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._jobs.put(job)

    def drain(self) -> None:
        """Wait until the jobs submitted so far have run (tests; a stop does it too)."""
        if self._thread is not None and not self._stopped:
            done = threading.Event()
            self._jobs.put(done.set)
            done.wait()

    def stop(self) -> None:
        """Run the jobs already submitted, then end the thread (waits for it)."""
        self._stopped = True
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception:  # noqa: BLE001 - a bug in one job must not end the others
                log.exception("commit log helper job failed")
            del job


def checkpoint(data_dir: Path, log_dir: Path, segment: Path, directories: set[Path],
               count_syncs: Callable[[str, int], object]) -> None:
    """Make every spool and commits file under ``directories`` durable, then delete
    ``segment`` (whose records they hold). Blocking; raises OSError."""
    device = os.stat(log_dir).st_dev
    existing = [d for d in directories if d.exists()]
    if (len(existing) >= SYNCFS_MIN_DIRECTORIES and syncs_whole_file_system(log_dir)
            and all(os.stat(d).st_dev == device for d in existing)):
        syncfs_of(log_dir)
        count_syncs("syncfs", 1)
    else:
        for directory in existing:
            count_syncs("fdatasync", _fsync_files(directory))
    segment.unlink(missing_ok=True)
    fsync_directory(log_dir)


def syncfs_of(directory: Path) -> None:
    """One ``syncfs`` of the file system holding ``directory`` (see
    `herald.fragment.syncfs` for where that is trusted); raises OSError."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        syncfs(fd)
    finally:
        os.close(fd)


def write_back_file(path: Path, lo: int, hi: int) -> None:
    """Start the write-back of ``[lo, hi)`` of ``path``, if it still exists (a spool
    persisted meanwhile is gone: nothing to do)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        write_back_range(fd, lo, hi)
    finally:
        os.close(fd)


def write_lines(lines: list[tuple[Path, int, bytes]], writeback_bytes: int = WRITEBACK_BYTES) -> None:
    """Write deferred commit lines, ``(commits file, offset, line)``: one open and
    one ``pwritev`` per run of adjacent lines of a file, then the write-back of the
    chunks of ``writeback_bytes`` they completed. A file removed meanwhile (its
    spool persisted) is skipped. Raises OSError."""
    by_path: dict[Path, list[tuple[int, bytes]]] = {}
    for path, at, line in lines:
        by_path.setdefault(path, []).append((at, line))
    for path, placed in by_path.items():
        try:
            fd = os.open(path, os.O_WRONLY)
        except FileNotFoundError:
            continue
        try:
            placed.sort(key=lambda item: item[0])
            for at, run in _runs(placed):
                pwrite_all(fd, run, at)
                if (span := chunks_completed(at, sum(map(len, run)), writeback_bytes)) is not None:
                    write_back_range(fd, *span)
        finally:
            os.close(fd)


def _runs(placed: list[tuple[int, bytes]]) -> list[tuple[int, list[bytes]]]:
    """Sorted ``(offset, line)`` pairs as runs of adjacent lines: ``(offset, lines)``."""
    runs: list[tuple[int, list[bytes]]] = []
    end = -1
    for at, line in placed:
        if at == end:
            runs[-1][1].append(line)
        else:
            runs.append((at, [line]))
        end = at + len(line)
    return runs


def _fsync_files(directory: Path) -> int:
    """fsync every file in ``directory`` and the directory itself (so a removed,
    persisted spool stays removed); how many syncs that took."""
    synced = 0
    for path in directory.iterdir():
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # persisted and removed meanwhile
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        synced += 1
    fsync_directory(directory)
    return synced + 1


def zeroed_file(path: Path, size: int, piece: int) -> None:
    """A new file of ``size`` zero bytes at ``path``, durable with its size
    (`write_zeros`, then fsync). Raises OSError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_zeros(fd, 0, size, piece)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_zeros(fd: int, lo: int, hi: int, piece: int) -> None:
    """Zeros over ``[lo, hi)`` of ``fd`` (whose end is ``lo``), in pieces of ``piece``
    bytes, each waited for (`written_back`): the disk never holds a long burst of
    them in front of other files' fdatasyncs. Not durable (the caller syncs).
    Raises OSError, the file cut back to ``lo`` first: zeros written before a full
    disk stopped them would otherwise hold its last bytes from the appends."""
    zeros = memoryview(bytes(min(piece, hi - lo)))
    try:
        for at in range(lo, hi, piece):
            n = min(piece, hi - at)
            pwrite_all(fd, [zeros[:n]], at)
            written_back(fd, at, at + n)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, lo)
        raise


def room_for(directory: Path, size: int) -> bool:
    """Whether ``directory``'s file system has room for ``size`` bytes of zeros made
    ahead of need, and as much again left for appends: speculative growth never
    takes the last of a disk that the appends themselves still fit on."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize >= 2 * size

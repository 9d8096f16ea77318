"""Durable little files: the streaming reader's sequencer snapshots.

A micro-batch reads journal bytes ``[start, end)``; the task that reads them
loads the snapshot saved at ``start`` and saves one at ``end``. A snapshot holds
the exact *resume* offset (a byte budget may cut ``end`` inside a message, which
then belongs to the batch it began in) and the Sequencer's checkpoint (producer
states: last ACK clock, open span begin). Content is a pure function of the
journal's bytes and the snapshot at ``start``, so a retried or replayed task
rewrites identical bytes: saving is idempotent.

Layout: ``<location>/herald/sequencer/<journal, %-quoted>/<offset:016x>.json``,
written atomically (temp file, fsync, rename).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from herald.message import Checkpoint

__all__ = ["BackgroundSaves", "Snapshot", "SnapshotStore", "atomic_write"]

log = logging.getLogger(__name__)


def atomic_write(path: Path, data: bytes, *, exclusive: bool = False) -> bool:
    """Write ``data`` to ``path`` durably and atomically. With ``exclusive`` the
    file is created only if absent (hard link, atomic on POSIX file systems);
    returns False if it already existed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            try:
                os.link(temp, path)
            except FileExistsError:
                return False
        else:
            os.replace(temp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return True
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Where to resume reading a journal and the sequencer state there."""

    resume: int
    checkpoint: Checkpoint

    def to_json(self) -> bytes:
        doc = {"resume": self.resume, "checkpoint": self.checkpoint.to_dict()}
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, field: str) -> Snapshot:
        doc = json.loads(data)
        return cls(int(doc["resume"]), Checkpoint.from_dict(doc["checkpoint"], f"{field}.checkpoint"))


class SnapshotStore:
    """Snapshots of one streaming reader, keyed by journal and batch offset."""

    def __init__(self, location: str) -> None:
        self.root = Path(location) / "herald" / "sequencer"

    def _dir(self, journal: str) -> Path:
        return self.root / quote(journal, safe="")

    def _path(self, journal: str, offset: int) -> Path:
        return self._dir(journal) / f"{offset:016x}.json"

    def load(self, journal: str, offset: int) -> Snapshot | None:
        path = self._path(journal, offset)
        try:
            return Snapshot.from_json(path.read_bytes(), str(path))
        except FileNotFoundError:
            return None

    def save(self, journal: str, offset: int, snapshot: Snapshot) -> None:
        atomic_write(self._path(journal, offset), snapshot.to_json())

    def prune(self, journal: str, below: int) -> int:
        """Remove snapshots of offsets < ``below`` (batches committed before);
        returns how many."""
        removed = 0
        directory = self._dir(journal)
        if not directory.is_dir():
            return 0
        for path in directory.glob("*.json"):
            try:
                offset = int(path.stem, 16)
            except ValueError:
                continue
            if offset < below:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def latest(self, journal: str) -> tuple[int, Snapshot] | None:
        """The snapshot with the largest offset (for lag and inspection)."""
        directory = self._dir(journal)
        offsets = sorted(int(p.stem, 16) for p in directory.glob("*.json")) if directory.is_dir() else []
        if not offsets:
            return None
        snap = self.load(journal, offsets[-1])
        return (offsets[-1], snap) if snap else None


class BackgroundSaves:
    """A read task's snapshot saves, run beside the task's reading on a small
    thread pool of its own, all awaited by `wait` before the task ends.

    A save is two fsyncs (the file, then its directory after the rename): 5-15 ms
    on this machine's disk, under load more, which a task paid in line after each
    slice. Started as soon as a slice's end state is known (before its last rows
    are handed on), a save overlaps the JSON fields, the Arrow hand-off to the JVM
    and the next packed slice's reading. Durability is unchanged: the task ends,
    and so its micro-batch can commit, only once every save is on disk; a save
    that fails fails the task. Saving early is safe because a snapshot at ``end``
    is a pure function of the journal's bytes and the snapshot at ``start``
    (`SnapshotStore`): a retry or replay rewrites the same bytes.

    Use it as a context manager: leaving the block (a failed read included) waits
    for the saves still running and stops the pool, so none outlives its task."""

    #: Threads of a task's pool: a packed task saves one snapshot per slice, a few.
    MAX_THREADS = 4

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Future[None]] = []

    def __enter__(self) -> BackgroundSaves:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._futures.clear()

    def save(self, store: SnapshotStore, journal: str, offset: int, snapshot: Snapshot) -> None:
        """Start saving ``snapshot`` (`SnapshotStore.save`) on the pool."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.MAX_THREADS, thread_name_prefix="herald-snapshot-save")
        self._futures.append(self._pool.submit(store.save, journal, offset, snapshot))

    def wait(self) -> None:
        """Block until every save has ended; raise the first one's error (in the
        order they were started) once none is still running."""
        futures, self._futures = self._futures, []
        wait_all(futures)
        for future in futures:
            future.result()

"""The broker-wide commit log: one fdatasync makes a whole sync round durable.

A group commit must have its bytes and the line that commits them on disk before
its appends are acknowledged [I-APPEND-3]. Synced where they live, that is two
fdatasyncs per journal per round (the spool and its ``.commits`` file); 32
journals' worth cost 2.2 ms against 0.12 ms for one file's write+fdatasync. Here a
round appends one record per group to one file, ``<data-dir>/commitlog/<seq>.log``,
and fdatasyncs only that file; the spools are written (page cache) but not synced
per round. Commit lines are not even written by the round (`CommitLog.defer`): the
log holds them, and the helper thread writes them to their commits files in
batches — only recovery reads those files, after the replay has written every
logged line, and a checkpoint writes them before it syncs. A round of a single
group is logged only while small (`LONE_BYTES`, the broker's
``--lone-append-bytes``); a larger one keeps its two concurrent in-place fdatasyncs.

A record (`herald.fragment.commit_log_records`) names the spool (its directory under the data dir and its begin offset),
where the group's bytes go in the spool file, the commit line and where it goes in
the commits file, and — for a group under `INLINE_BYTES` — the bytes themselves.
A larger group's bytes are fdatasync'd in its spool beside the log's sync (they
are not written twice); its record carries only the line. Each record is framed
with its length and CRC32C, so a torn tail (a power cut mid-write) ends the
segment's intact records and is ignored: none of its groups was acknowledged.

Checkpoint: once a segment holds `SEGMENT_BYTES` (tests give `CommitLog.open` a
few KiB instead), the next round writes to a new segment and the log's helper
thread (`herald.fragment.commit_log_worker`) makes every spool and commits file
the old segment touched durable (an fsync of each file and its directory, or one
``syncfs`` for many journals), then deletes it.
The same thread starts the write-back of each spool chunk once logged, so a
checkpoint finds little left to write (`herald.fragment.writeback`), and makes
the next segment whole (zeros, size, name) in a file of its own once the current
is half full (a grown one: 512 KiB): an fdatasync writes and waits for every dirty
page of its file, so rounds synced during a growth carried its zeros (p50 2.7-7.6
ms, not 0.1-0.2).
Only a broker's first segment grows (ahead of the rounds, in pieces), and it is
sealed as soon as the next is made: idle brokers write no whole segment.

Restart: `CommitLog.open` replays every intact record into its spool (files
already persisted and removed are skipped), syncs them, deletes the replayed
segments, and only then do spools recover (`herald.fragment.spool_recovery`),
exactly as if every round had synced them [I-FRAG-2]. Replay writes the same bytes
at the same places, so a crash during it is harmless: the segments stay until it
completes.

Who uses it: the data dir's owner opens it (`herald.broker.datadir`) and the broker
hands it to each journal, which gives it to every spool it creates
(``Spool(..., commit_log=...)``); a round is logged only when one open log covers
all its spools (`herald.fragment.rounds.logged_to`). It is passed, not looked up by
path, so two brokers (or tests) in one process never log into each other's.

Blocking throughout: `append` runs on the sync round thread
(`herald.fragment.rounds`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from herald.durable import fsync_directory, make_durable_dirs
from herald.fragment.commit_log_lines import DeferredLines
from herald.fragment.commit_log_worker import LogWorker, checkpoint, room_for, write_back_file, write_zeros, zeroed_file
from herald.fragment.fdatasyncs import SyncAverage, fdatasync_twice
from herald.fragment.whole_writes import pwrite_all
from herald.fragment.writeback import chunks_completed, write_back_range

__all__ = ["CommitLog"]

log = logging.getLogger(__name__)

LOG_DIR = "commitlog"
LOG_SUFFIX = ".log"
SPARE_SUFFIX = ".spare"  # a next segment being made; renamed to its .log name once whole
#: Groups smaller than this carry their bytes in the log; larger ones are synced in place.
INLINE_BYTES = 256 << 10
#: A round of one group under this is logged too (`herald.fragment.rounds`): one
#: fdatasync instead of two in place, and no hand-off to a helper (on a quiet disk). A larger
#: lone group (many writers on one journal) stays in place: logged, its bytes would
#: reach the disk twice (log, then spool write-back) at the rate of the round.
LONE_BYTES = 8 << 10
RECORD_SLACK = 4 << 10  # a record's framing, spool name and commit line, at most (takes_lone)
#: A segment this full is checkpointed (its files synced) and replaced by a new one.
SEGMENT_BYTES = 64 << 20
#: A segment grows in zeros by steps that double from the first to the largest: an
#: fdatasync that must journal a size change costs several times one that does not.
FIRST_GROW_BYTES = 1 << 20
MAX_GROW_BYTES = 8 << 20
#: Growth reaches the device in pieces of this size, each waited for: an 8 MiB burst
#: of zeros held every log fdatasync issued meanwhile behind it for milliseconds.
GROW_PIECE_BYTES = 256 << 10
#: A logged spool's write-back starts per this many bytes (not the 1 MiB of
#: `WRITEBACK_BYTES`): smaller bursts for the log's fdatasyncs to queue behind.
LOG_WRITEBACK_BYTES = 256 << 10


class CommitLog:
    """One data dir's commit log (see the module doc). `append` is called by one thread
    at a time (the sync round thread); checkpoints run on a helper thread."""

    def __init__(self, data_dir: Path, count_syncs: Callable[[str, int], object] = lambda kind, n: None, *,
                 segment_bytes: int = SEGMENT_BYTES, writeback_bytes: int = LOG_WRITEBACK_BYTES,
                 lone_bytes: int = LONE_BYTES):
        self.data_dir = Path(data_dir)
        self.directory = self.data_dir / LOG_DIR
        self.count_syncs = count_syncs  # ("fdatasync" | "syncfs", n): the broker's metrics
        self.segment_bytes = segment_bytes  # a segment this full is sealed and checkpointed
        self.writeback_bytes = writeback_bytes  # write-back starts per chunk of this many bytes
        self.lone_bytes = lone_bytes  # a round of one group under this is logged (takes_lone); 0: never
        self._names: dict[Path, bytes] = {}
        self._fd, self._seq = -1, 0
        self._pos = self._allocated = 0
        self._dirty: set[Path] = set()  # spool directories written since the segment began
        self._worker = LogWorker()
        self._idle = threading.Event()  # no checkpoint under way
        self._idle.set()
        self._segment_lock = threading.Lock()  # the segment's descriptor and size: rounds vs growth ahead
        self._grow_after = 0.0  # growth ahead may be asked from then (inf: under way; later: failed)
        self._spare_asked = self._spare = 0  # the last segment asked to be made ahead / made whole
        self.replayed = 0
        self._lines = DeferredLines(self._worker, writeback_bytes)  # logged groups' commit lines
        self._broken: OSError | None = None  # see _forget (and DeferredLines.failed)
        self.sync_average = SyncAverage()  # its rounds' fdatasyncs, and lone ones in place (takes_lone)
        self.closed = False  # see close

    @classmethod
    def open(cls, data_dir: Path, count_syncs: Callable[[str, int], object] = lambda kind, n: None, *,
             segment_bytes: int = SEGMENT_BYTES, writeback_bytes: int = LOG_WRITEBACK_BYTES,
             lone_bytes: int = LONE_BYTES) -> CommitLog:
        """Replay what a previous run left, then start a fresh segment. Blocking: run
        it before any spool under ``data_dir`` recovers. ``segment_bytes`` and
        ``writeback_bytes``: the tuning (module constants by default), smaller in
        tests so that a few rounds seal segments and start write-backs;
        ``lone_bytes``: see `takes_lone`."""
        commit_log = cls(data_dir, count_syncs, segment_bytes=segment_bytes, writeback_bytes=writeback_bytes,
                         lone_bytes=lone_bytes)
        make_durable_dirs(commit_log.directory)
        from herald.fragment.commit_log_replay import replay_segments  # one concept each
        segments = commit_log._segments()
        commit_log.replayed = replay_segments(commit_log.data_dir, segments)
        commit_log._seq = max((int(p.stem, 16) for p in segments), default=0) + 1
        for spare in commit_log.directory.glob(f"*{SPARE_SUFFIX}"):
            spare.unlink()  # a making cut short
        commit_log._start_segment()
        for path in segments:
            path.unlink()
        fsync_directory(commit_log.directory)
        return commit_log

    def close(self) -> None:
        """Stop logging (broker stopping: later rounds sync in place); segments stay for replay."""
        self.closed = True  # rounds that have not yet chosen the log no longer do
        self._lines.submit()
        self._worker.stop()
        with self._segment_lock:
            fd, self._fd = self._fd, -1
            if fd >= 0:
                os.close(fd)

    def name_of(self, spool_directory: Path) -> bytes:
        """A spool directory as records name it (relative to the data dir)."""
        if (name := self._names.get(spool_directory)) is None:
            name = self._names[spool_directory] = str(spool_directory.relative_to(self.data_dir)).encode()
        return name

    def append(self, frames: Sequence[list[bytes]], directories: Sequence[Path],
               lines: Sequence[tuple[Path, int, bytes]] = (),
               meanwhile: Callable[[], object] | None = None) -> tuple[int, int]:
        """Write a round's records and fdatasync the segment: once this returns, every
        group in ``frames`` is durable [I-APPEND-3]. ``directories``: the spool
        directories they write, synced by the next checkpoint. ``lines``: commit lines
        (commits file, offset, line) the round left to the log, written to their
        files later (`defer`); only a round that cannot be taken back after this
        returns (no in-place sync of its own) may pass them. On OSError nothing of
        the round counts: its records are zeroed (best effort) and later rounds go to
        a new segment, so replay never reads past them into a later round's records.
        Returns the records' place (offset, size) for `forget`. ``meanwhile``: run on
        this thread while the records' write-back, started at once, runs, then the
        fdatasync (`herald.fragment.rounds` writes the spools' copies of the records'
        bytes then; a helper thread running the fdatasync beside it cost a hand-off
        per round, 2 us of CPU per append at 16 journals); an OSError it raises fails
        the round as a failed sync does."""
        if (broken := self._broken or self._lines.failed) is not None:
            raise broken
        if self._fd < 0:  # closed (the broker is stopping) while the round was on its way
            raise OSError(errno.EBADF, "the commit log is closed")
        buffers = [part for parts in frames for part in parts]
        size = sum(map(len, buffers))
        at, twice = self._pos, len(frames) > 1 and self.sync_average.slow  # many journals, contended disk
        try:
            if at + size > self._allocated:
                with self._segment_lock:  # growth ahead may be under way: wait, look again
                    if at + size > self._allocated:
                        self._grow(at + size)
            pwrite_all(self._fd, buffers, at)
            if meanwhile is not None:
                write_back_range(self._fd, at, at + size)
                meanwhile()
            self._before_sync(directories, at + size, 1 + twice)
            started = time.perf_counter()
            (fdatasync_twice if twice else os.fdatasync)(self._fd)
            self.sync_average.add(time.perf_counter() - started)
        except OSError:
            self._forget(at, size)
            raise
        self._pos = at + size
        if lines:  # before a rotation below: its checkpoint must find them written
            self.defer(lines)
        whole_next = self._spare > self._seq and self._allocated < self.segment_bytes  # this one was grown
        if (self._pos >= self.segment_bytes or whole_next) and self._idle.is_set():
            self._rotate()
        return at, size

    def _before_sync(self, directories: Sequence[Path], end: int, syncs: int) -> None:
        """What need not wait for the sync, done while the records' write-back runs, not
        after it, where the writers wait: the spool directories marked for the next
        checkpoint, the syncs counted, growth or the next segment asked (log at ``end``)."""
        self._dirty.update(directories)
        self.count_syncs("fdatasync", syncs)
        self._prepare_ahead(end)

    def takes_lone(self, size: int) -> bool:
        """Whether a round of one group of ``size`` bytes is logged: under `lone_bytes`
        (the broker's ``--lone-append-bytes``; 0: never), while syncs are not slow
        (`sync_average`: on a contended disk two syncs in place return sooner), and
        fitting as the segment is (else growth is asked, and the round syncs in place)."""
        if size >= self.lone_bytes or self.sync_average.slow:
            return False
        if self._pos + size + RECORD_SLACK <= self._allocated:
            return True
        self._prepare_ahead()
        return False

    def start_writeback(self, path: Path, at: int, size: int) -> None:
        """Bytes ``[at, at + size)`` of ``path`` (a spool or commits file) were just
        written and logged: start the write-back of the chunks they complete, on
        the helper thread (`herald.fragment.writeback`)."""
        if (span := chunks_completed(at, size, self.writeback_bytes)) is not None:
            self._worker.submit(functools.partial(write_back_file, path, *span))

    def defer(self, lines: Sequence[tuple[Path, int, bytes]]) -> None:
        """Commit lines already durable in the log, to be written to their commits
        files in a batch by the helper thread (`herald.fragment.commit_log_lines`)."""
        self._lines.defer(lines)

    @property
    def lines_pending(self) -> bool:
        """Whether some deferred line may not be in its commits file yet."""
        return self._lines.pending

    def flush_lines(self) -> None:
        """Every deferred line in its commits file (page cache) once this returns: a
        journal that closes leaves its spools to be recovered from their files. Blocking."""
        self._lines.submit()
        self.drain()

    def drain(self) -> None:
        """Wait for the helper thread's jobs submitted so far (checkpoints, write-backs,
        deferred lines): tests then know that a full segment is sealed at once."""
        self._worker.drain()

    @property
    def segment(self) -> Path:
        """The segment rounds go to now; another once it is sealed (to be checkpointed)."""
        return self._segment_path(self._seq)

    def forget(self, at: int, size: int) -> None:
        """Take back the round `append` logged at ``(at, size)``, durably, because a
        group of it failed after all (its in-place data sync): as `_forget`. If that
        append sealed the segment (it filled it), the records can no longer be zeroed
        before a checkpoint might replay them, so the log refuses every later round
        until a restart, as when zeroing fails."""
        if at + size <= self._pos and self._fd >= 0:
            self._forget(at, size)
        else:  # this round's own append sealed the segment
            self._broken = OSError(errno.EIO, "a logged round failed after its segment was sealed")
            log.error("commit log: a logged round failed in a sealed segment; refusing appends until restart")

    def _forget(self, at: int, size: int) -> None:
        """Zero a failed round's records, durably, and go on in a new segment (replay
        stops at the zeros): a replay must never bring back a group that failed
        [I-APPEND-2], whose place a later group synced in its spool may take. If
        even that fails, the log refuses every later round until a restart."""
        try:
            pwrite_all(self._fd, [bytes(size)], at)
            os.fdatasync(self._fd)
            self._rotate()
        except OSError as err:
            log.error("commit log cannot forget a failed round; refusing appends until restart: %s", err)
            self._broken = err

    def _segments(self) -> list[Path]:
        return sorted(self.directory.glob(f"*{LOG_SUFFIX}"), key=lambda p: int(p.stem, 16))

    def _segment_path(self, seq: int) -> Path:
        return self.directory / f"{seq:016x}{LOG_SUFFIX}"

    def _start_segment(self) -> None:
        """Open segment ``_seq``, its name durable before any record counts; whole if made ahead."""
        path = self._segment_path(self._seq)
        if self._spare == self._seq:
            self._fd = os.open(path, os.O_RDWR)
            self._pos, self._allocated = 0, os.fstat(self._fd).st_size
            return
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self._pos = self._allocated = 0
        fsync_directory(self.directory)

    def _prepare_ahead(self, end: int | None = None) -> None:
        """As a round ends at ``end`` (default: where the log is): growth of this
        segment once its room runs low; the making of the next once this one is half
        full (grown: 512 KiB of records) (each asked once; sealed, never grown)."""
        end = self._pos if end is None else end
        if self._allocated - end < _grow_step(self._allocated) // 2 and time.monotonic() >= self._grow_after:
            self._grow_after = float("inf")
            self._worker.submit(functools.partial(self._grow_ahead, self._seq))
        seg, grown = self.segment_bytes, self._allocated < self.segment_bytes
        if end >= min(seg, FIRST_GROW_BYTES if grown else seg) // 2 and self._spare_asked <= self._seq:
            self._spare_asked = self._seq + 1
            self._worker.submit(functools.partial(self._make_spare, self._seq + 1))

    def _make_spare(self, seq: int) -> None:
        """On the helper thread: segment ``seq`` made whole (zeros, size, name durable)
        under a name replay ignores until then; dropped if the log moved on or closed."""
        spare, size = self.directory / f"{seq:016x}{SPARE_SUFFIX}", self.segment_bytes + _grow_step(self.segment_bytes)
        try:
            if not self.closed and room_for(self.directory, size):  # else: grown in place, as needed
                zeroed_file(spare, size, GROW_PIECE_BYTES)
                with self._segment_lock:
                    if self._seq < seq and not self.closed:
                        os.rename(spare, self._segment_path(seq))
                        fsync_directory(self.directory)
                        self._spare = seq
                        return
        except OSError as err:  # the segment grows in place instead
            log.warning("commit log: making the next segment ahead failed: %s", err)
        with contextlib.suppress(OSError):
            spare.unlink()

    def _grow(self, needed: int) -> None:
        """Zeros past the end, fsync'd (size included), so records need only data syncs.
        Under ``_segment_lock``: records go below ``_allocated``, moved once durable."""
        end = self._allocated + max(_grow_step(self._allocated), needed - self._allocated)
        write_zeros(self._fd, self._allocated, end, GROW_PIECE_BYTES)
        os.fsync(self._fd)
        self._allocated = end
        self.count_syncs("fdatasync", 1)

    def _grow_ahead(self, seq: int) -> None:
        """On the helper thread: segment ``seq``'s next step, unless sealed meanwhile."""
        retry_at = 0.0
        try:
            if not room_for(self.directory, _grow_step(self._allocated)):
                retry_at = time.monotonic() + 1.0  # a nearly full disk: what is left is the appends'
                return
            with self._segment_lock:
                if self._seq == seq and self._fd >= 0:
                    self._grow(self._allocated + 1)
        except OSError as err:  # the round that needs the room grows it, or fails
            log.warning("commit log: growing the segment ahead failed: %s", err)
            retry_at = time.monotonic() + 1.0  # a full disk: not again at every round
        finally:
            self._grow_after = retry_at

    def _rotate(self) -> None:
        """Seal the segment (a checkpoint syncs its spools, then deletes it); start the next."""
        sealed, directories = self._segment_path(self._seq), self._dirty
        self._dirty = set()
        with self._segment_lock:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
            self._seq += 1
            self._start_segment()
        self._idle.clear()
        self._lines.submit()  # the checkpoint syncs commits files: their lines go first
        self._worker.submit(functools.partial(self._checkpoint, sealed, directories))

    def _checkpoint(self, segment: Path, directories: set[Path]) -> None:
        """On the helper thread: `checkpoint` a sealed segment; idle again after."""
        try:
            if self._lines.failed is not None:  # deferred lines may be missing: keep it for replay
                raise self._lines.failed
            checkpoint(self.data_dir, self.directory, segment, directories, self.count_syncs)
        except OSError as err:  # the segment stays: the next start replays it
            log.error("commit log checkpoint failed (segment kept for replay): %s", err)
        finally:
            self._idle.set()


def _grow_step(allocated: int) -> int:
    """How much a segment of ``allocated`` bytes grows by next."""
    return min(max(allocated, FIRST_GROW_BYTES), MAX_GROW_BYTES)


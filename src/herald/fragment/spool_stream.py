"""A large append's body written into its spool while the body is still arriving.

Buffered, a 1 MiB append does all its work after its last byte: the pieces are
joined, handed to the round thread, written with one ``pwritev`` and hashed twice
(its own SHA1 and the fragment's running SHA1), and only then synced — with one
writer each step is on the critical path (measured: 3.9 ms from the last byte to
the answer, 1 ms of it the data's fdatasync). A `SpoolStream` instead writes each
piece past the spool's committed end as it arrives and feeds both SHA1s on a
helper thread (`StreamSums`: one paired pass where built), and (with the C
extension) starts their write-back every `WRITEBACK_MIN_BYTES`, so at the last byte
only the syncs and the commit line remain: the data's fdatasync starts from the
loop at once, with little left to write; the commit line is written and its sync
started as soon as the SHA1 is whole (`StreamedWrite`: the line goes ahead); and
the body joins the next sync round as a `StreamedWrite`, one group like any other,
which adopts that line and waits for both syncs [I-APPEND-3].

The spool itself is untouched until the group commits: the stream hashes a copy of
the running SHA1 and the spool's pending delta stays 0, so a body cut short, late
or failed leaves the committed end and SHA1 state exactly as they were, and the
bytes it wrote are past the committed end, where readers never look, recovery
truncates [I-FRAG-2] and the next append writes over them [I-APPEND-2]. (A line
written ahead, past the last commit line, is erased if its group fails, and trusted
by recovery only where the spool's bytes match its SHA1.) The caller
holds the journal's spool lock for the whole body (appends never interleave
[I-APPEND-1]) and the spool's descriptors pinned.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from herald.fragment.commit_log import INLINE_BYTES
from herald.fragment.commits import record_affixes, registers_json
from herald.fragment.fdatasyncs import SYNCS, PendingSync
from herald.fragment.group_write import GroupWrite
from herald.fragment.spool_sums import PAIRED, new_sha1, update_both
from herald.fragment.whole_writes import pwrite_all
from herald.helper_threads import HelperThreads
from herald.protocol.labels import LabelSet

_native_fdatasync: Callable[[int], PendingSync] | None
_native_writeback: Callable[[int, int, int], None] | None
try:  # the data sync on a thread that never takes the GIL (see `_start_data_sync`)
    from herald.fragment._spool_native import start_fdatasync as _native_fdatasync  # type: ignore[assignment]
except ImportError:  # not built, or built before it: a Python helper thread's
    _native_fdatasync = None
try:  # each piece's write-back started as it arrives (`SpoolStream.write`)
    from herald.fragment._spool_native import start_writeback as _native_writeback
except ImportError:  # not built, or built before it: the data sync writes the whole body
    _native_writeback = None

if TYPE_CHECKING:
    from herald.fragment.spool import Spool

__all__ = ["STREAM_MIN_BYTES", "SpoolStream", "StreamSums", "StreamedWrite"]

#: Bodies this large or larger may be streamed. Not less than the commit log's
#: `INLINE_BYTES`: a streamed group is never copied into the log (its bytes are
#: already in the spool), it is synced in place, as groups this large are.
STREAM_MIN_BYTES = INLINE_BYTES
#: A body's write-back starts once this many bytes of whole pages of it are in the
#: page cache (`SpoolStream.write`); whole pages, so that no page under write-back is
#: written again. With the loop's reads of 256000 bytes, every other read: each
#: start costs the kernel an allocation and a submission of its own (one per read
#: cost ~0.3 ms more CPU per MiB than this, in 3 of 3 pairs), and for a 1 MiB body
#: the last byte's fdatasync is left the same tail (its last read).
WRITEBACK_MIN_BYTES = 384 << 10
_PAGE_MASK = ~4095


class _Feed:
    """A body's pieces fed in order, on a `_HASHING` thread, to ``update`` (one SHA1's,
    or `update_both` of two). Pieces that arrive while it hashes wait in a list and
    are taken together, so a piece costs the loop a lock and an append (a hand-off
    only when the feed is idle), where a `concurrent.futures` submit cost it a
    `Future`, a work item and a dozen Python-level lock operations per piece. An
    action (`then`) runs in the same order, once the pieces before it are hashed."""

    __slots__ = ("_draining", "_idle", "_lock", "_pieces", "error", "update")

    def __init__(self, update: Callable[[bytes], object]) -> None:
        self.update = update
        self._pieces: list[bytes | Callable[[], object]] = []
        self._lock = threading.Lock()
        self._idle = threading.Lock()  # held from a drain's hand-off to its end
        self._draining = False
        self.error: BaseException | None = None

    def feed(self, piece: bytes) -> None:
        with self._lock:
            self._pieces.append(piece)
            if self._draining:
                return  # the drain under way takes it
            self._draining = True
            self._idle.acquire()  # free: the last drain released it, under this lock
        _HASHING.drain(self)

    def then(self, action: Callable[[], object]) -> None:
        """Run ``action`` once every piece fed so far is hashed: here and now if they
        are, else on the hashing thread right after the last of them. Never after a
        failed update (a wrong SHA1 must never be written). ``action`` raises nothing."""
        with self._lock:
            if self._draining:
                self._pieces.append(action)
                return
        if self.error is None:
            action()

    def drain(self) -> None:
        """On a `_HASHING` thread: hash every piece fed, including those fed meanwhile.
        The drain ends under the lock that `feed` takes, so no piece is left behind."""
        while True:
            with self._lock:
                pieces, self._pieces = self._pieces, []
                if not pieces or self.error is not None:
                    self._draining = False
                    self._idle.release()
                    return
            try:
                for piece in pieces:
                    if callable(piece):  # see `then`
                        piece()
                    else:
                        self.update(piece)
            except BaseException as err:  # noqa: BLE001 - kept for wait(): a wrong SHA1 must never commit
                self.error = err

    def settle(self) -> None:
        """Block until every piece fed so far is hashed (every action run), whether
        or not an update failed."""
        with self._idle:
            pass

    def wait(self) -> None:
        """Block until every piece fed so far is hashed; raise what failed, if any."""
        self.settle()
        if self.error is not None:
            raise self.error


class _Hashing(HelperThreads[_Feed]):
    """Two threads draining `_Feed` s, each feed's pieces in order: a body's two
    SHA1s in one paired pass, or (hashlib's, `PAIRED` False) side by side."""

    def drain(self, feed: _Feed) -> None:
        self._submit(feed)

    def _run(self, job: _Feed) -> None:
        job.drain()

    def _finish(self, job: _Feed, outcome: object) -> None:
        pass  # waited for through the feed itself (`_Feed.wait`)


_HASHING = _Hashing(2, "herald-sha1-stream")


class StreamSums:
    """A streamed body's two SHA1s, updated piece by piece on helper threads: the
    body's own, and a copy of the spool's running SHA1 (the spool's stays as it was
    until the group commits). Paired (`herald.fragment.spool_sums`), one feed
    hashes each piece into both in one pass; else one feed per SHA1."""

    def __init__(self, running_sha1) -> None:
        self._running, self._body = running_sha1.copy(), new_sha1()
        if PAIRED:
            self._feeds = [_Feed(partial(update_both, self._running, self._body))]
        else:
            self._feeds = [_Feed(self._running.update), _Feed(self._body.update)]

    def update(self, piece: bytes) -> None:
        for feed in self._feeds:
            feed.feed(piece)

    def then(self, action: Callable[[object], object]) -> None:
        """``action(running)`` once the running SHA1 holds every piece fed so far (on
        the loop now, or on a hashing thread then: see `_Feed.then`)."""
        self._feeds[0].then(partial(action, self._running))

    def settle(self) -> None:
        """Block until every piece fed so far is hashed and every action run, whether
        or not an update failed (`result` then raises it)."""
        for feed in self._feeds:
            feed.settle()

    def result(self) -> tuple[object, str]:
        """The running SHA1 with the body, and the body's SHA1 (blocking: waits for
        the pieces fed so far to be hashed)."""
        for feed in self._feeds:
            feed.wait()
        return self._running, self._body.hexdigest()


class SpoolStream:
    """One body being written past ``spool``'s committed end (see the module doc).
    Loop only; the caller holds the spool lock and the spool's descriptors."""

    def __init__(self, spool: Spool, length: int) -> None:
        assert length >= STREAM_MIN_BYTES and spool.pending_bytes == 0
        self.spool, self.length = spool, length
        self.at = spool.content_length  # file offset of the body's first byte
        self.written = 0
        self.error: OSError | None = None
        self.sums = StreamSums(spool._sha1)
        self.data_sync: PendingSync | None = None  # started at the last byte
        self._written_back = self.at & _PAGE_MASK  # the file's offset up to which write-back started

    @property
    def complete(self) -> bool:
        return self.written == self.length

    def write(self, piece: bytes) -> None:
        """Write the body's next piece to the page cache and start hashing it. After
        a failed write the rest is only counted: the append fails whole at commit."""
        assert self.written + len(piece) <= self.length
        if self.error is None:
            try:
                pwrite_all(self.spool._fd, [piece], self.at + self.written)
            except OSError as err:
                self.error = err
            else:
                self.sums.update(piece)
                # The file now reaches this far: `Spool.close` cuts what never committed.
                end = self.at + self.written + len(piece)
                self.spool._data_allocated = max(self.spool._data_allocated, end)
                if _native_writeback is not None and end < self.at + self.length:
                    self._write_back(end)
        self.written += len(piece)
        if self.complete and self.error is None:
            # Every byte is in the page cache: the data's fdatasync needs nothing
            # else, so it starts now, before the hop to the sync round.
            self.data_sync = _start_data_sync(self.spool._fd)

    def _write_back(self, end: int) -> None:
        """Start the write-back of the body's whole pages up to ``end`` on a native
        thread (`_spool_native.start_writeback`): the device takes the body while
        the rest of it arrives, and the data's fdatasync at the last byte has only
        its tail left to write. (Started on the loop itself, each piece's cost the
        loop 0.3 ms of CPU per MiB, measured: here it costs one queued job.)"""
        page_end = end & _PAGE_MASK
        if page_end - self._written_back >= WRITEBACK_MIN_BYTES:
            assert _native_writeback is not None
            _native_writeback(self.spool._fd, self._written_back, page_end)
            self._written_back = page_end

    def read_back(self) -> bytes:
        """The body's bytes written so far, read back (from the page cache): a body
        that yields its journal is buffered from here on (`herald.broker.append_stream`)."""
        return os.pread(self.spool._fd, self.written, self.at) if self.written else b""

    def group_write(self, registers: LabelSet, now_unix: float) -> StreamedWrite:
        """The whole body's group, for a sync round."""
        assert self.complete
        return StreamedWrite(self, registers, now_unix)


def _start_data_sync(fd: int) -> PendingSync:
    """A streamed body's data fdatasync, started at its last byte. Where built, on a
    native thread that never takes the GIL (`_spool_native.start_fdatasync`): a
    Python helper (`SYNCS`) needs the GIL to start the sync and again to report it,
    and behind a busy event loop and a persisting thread the start alone waited
    0.1-0.7 ms (time stamps, 1 MiB x1, load ~4), on the append's critical path.
    The native start and wait cost ~15 us of CPU against SYNCS' ~19."""
    if _native_fdatasync is not None:
        return _native_fdatasync(fd)
    return SYNCS.fdatasync(fd)


class StreamedWrite(GroupWrite):
    """A `GroupWrite` whose bytes a `SpoolStream` already wrote and hashed: its data
    step only starts the data's fdatasync, its seal waits for the SHA1s.

    Its commit line is written *ahead* (`_line_ahead`): the moment the running SHA1
    holds the whole body — on the hashing thread, or at once if it already does —
    the line goes to the commits file and its fdatasync starts beside the data's,
    instead of after the hop to the round thread and the seal there (on the
    append's critical path: that line's sync started 0.4-3.7 ms after the last
    byte, the data's 0.2 ms after it; perf trace, 1 MiB x1, load ~8). A line
    written before its data is durable is what an in-place round already writes
    (`GroupWrite`): recovery trusts a line only if the spool's bytes hash to its
    sum (`herald.fragment.commits`), and the append is answered only once both
    syncs returned [I-APPEND-3]. A group that fails erases the line (`finish`, as
    any in-place group's), never before the line is written: `finish` waits for it.
    """

    HOLDS_BYTES = False

    def __init__(self, stream: SpoolStream, registers: LabelSet, now_unix: float) -> None:
        super().__init__(stream.spool, (), registers, now_unix)
        self.stream = stream
        self.size = stream.length
        #: The line written ahead and its sync, or the error that failed it (set
        #: once, by whichever thread ran `_line_ahead`; read after `settle`).
        self._ahead: tuple[bytes, float | None, str, PendingSync | OSError] | None = None
        self._ahead_taken = False
        if stream.data_sync is not None:  # waited for by `finish`, whatever fails first
            self._syncs.append(stream.data_sync)
            spool = stream.spool
            first = now_unix if spool.first_append_unix is None else None
            prefix, suffix = record_affixes(spool.end + stream.length, registers_json(registers), first)
            stream.sums.then(partial(self._line_ahead, prefix, suffix, first))

    def _line_ahead(self, prefix: bytes, suffix: bytes, first: float | None, running: Any) -> None:
        """Write the commit line (its ``running`` SHA1 now whole) at the commits
        file's end and start its fdatasync: on a hashing thread, or on the loop
        (see the class doc). Left to the round where the file must grow first."""
        spool = self.spool
        fragment_sum = running.hexdigest()
        line = prefix + fragment_sum.encode() + suffix
        if spool._commits_pos + len(line) > spool._commits_allocated:
            return
        try:
            pwrite_all(spool._commits_fd, [line], spool._commits_pos)
            sync: PendingSync | OSError = _start_data_sync(spool._commits_fd)
        except OSError as err:
            sync = err
        self._ahead = (line, first, fragment_sum, sync)

    def _take_ahead(self) -> bool:
        """Once the line ahead was written (`settle`): adopt it as this group's, its
        sync waited for by `finish` (or raise what failed it). False: none written."""
        if self._ahead is None:
            return False
        self._line, self._first, self._fragment_sum, sync = self._ahead
        if not self._ahead_taken:
            self._ahead_taken = True
            if isinstance(sync, OSError):
                raise sync
            self._syncs.append(sync)
        return True

    def write_data(self, sync: bool = True) -> None:
        spool, stream = self.spool, self.stream
        if stream.error is not None:
            raise stream.error
        assert spool.pending_bytes == 0 and stream.at == spool.content_length
        self._data_at = stream.at
        spool._delta = stream.length  # rolled back with the SHA1 if the group fails
        if sync and stream.data_sync is None:
            self._syncs.append(SYNCS.fdatasync(spool._fd))

    def write_record(self, sync_here: bool = True, sync_later: bool = True) -> None:
        """`GroupWrite.write_record`, with no write or sync of its own where the line
        went ahead (`_line_ahead`)."""
        self.seal()
        if self._ahead is None:
            super().write_record(sync_here, sync_later)
        else:
            self._line_at = self.spool._commits_pos

    def seal(self) -> None:
        """The SHA1s the stream computed as the body arrived, then the commit line
        (in place or logged: every round seals through here): the one written ahead,
        if it was."""
        if self._ahead_taken:
            return
        running, body_sum = self.stream.sums.result()
        self.spool._sha1 = running
        self._sums = [body_sum]
        if not self._take_ahead():
            super().seal()  # hashes nothing: no contents
            self._sums = [body_sum]

    def finish(self) -> list[str]:
        """`GroupWrite.finish`, once the line ahead is written if it is to be (so that
        a failed group erases it, whichever step failed)."""
        self.stream.sums.settle()
        try:
            self._take_ahead()
        except OSError as err:
            self.error = self.error or err
        return super().finish()

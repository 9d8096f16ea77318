"""A large append's body written into its spool while the body is still arriving.

Buffered, a 1 MiB append does all its work after its last byte: the pieces are
joined, handed to the round thread, written with one ``pwritev`` and hashed twice
(its own SHA1 and the fragment's running SHA1), and only then synced — with one
writer each step is on the critical path (measured: 3.9 ms from the last byte to
the answer, 1 ms of it the data's fdatasync). A `SpoolStream` instead writes each
piece past the spool's committed end as it arrives and feeds both SHA1s on two
helper threads (`StreamSums`), so at the last byte only the syncs and the commit
line remain: the data's fdatasync starts from the loop at once, and the body joins
the next sync round as a `StreamedWrite`, one group like any other.

The spool itself is untouched until the group commits: the stream hashes a copy of
the running SHA1 and the spool's pending delta stays 0, so a body cut short, late
or failed leaves the committed end and SHA1 state exactly as they were, and the
bytes it wrote are past the committed end, where readers never look, recovery
truncates [I-FRAG-2] and the next append writes over them [I-APPEND-2]. The caller
holds the journal's spool lock for the whole body (appends never interleave
[I-APPEND-1]) and the spool's descriptors pinned.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from herald.fragment.commit_log import INLINE_BYTES
from herald.fragment.fdatasyncs import SYNCS, PendingSync
from herald.fragment.rounds import GroupWrite, pwrite_all
from herald.protocol.labels import LabelSet

if TYPE_CHECKING:
    from herald.fragment.spool import Spool

__all__ = ["STREAM_MIN_BYTES", "SpoolStream", "StreamSums", "StreamedWrite"]

#: Bodies this large or larger may be streamed. Not less than the commit log's
#: `INLINE_BYTES`: a streamed group is never copied into the log (its bytes are
#: already in the spool), it is synced in place, as groups this large are.
STREAM_MIN_BYTES = INLINE_BYTES

# One thread per SHA1, so that each one's updates run in order while the two run
# side by side (hashlib drops the GIL for large updates).
_RUNNING = ThreadPoolExecutor(max_workers=1, thread_name_prefix="herald-sha1-running")
_BODY = ThreadPoolExecutor(max_workers=1, thread_name_prefix="herald-sha1-body")


class StreamSums:
    """A streamed body's two SHA1s, updated piece by piece on helper threads: the
    body's own, and a copy of the spool's running SHA1 (the spool's stays as it was
    until the group commits)."""

    def __init__(self, running_sha1) -> None:
        self.running = running_sha1.copy()
        self.body = hashlib.sha1()
        self._last: tuple[Future[None], Future[None]] | None = None

    def update(self, piece: bytes) -> None:
        self._last = (_RUNNING.submit(self.running.update, piece), _BODY.submit(self.body.update, piece))

    def result(self) -> tuple[object, str]:
        """The running SHA1 with the body, and the body's SHA1 (blocking: waits for
        the last updates; each thread runs its updates in order)."""
        if self._last is not None:
            for update in self._last:
                update.result()
        return self.running, self.body.hexdigest()


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
                # (Starting each piece's write-back here with sync_file_range cost the
                # loop 0.3 ms of CPU per MiB and one writer 15 % of its MB/s, measured.)
                end = self.at + self.written + len(piece)
                self.spool._data_allocated = max(self.spool._data_allocated, end)
        self.written += len(piece)
        if self.complete and self.error is None:
            # Every byte is in the page cache: the data's fdatasync needs nothing
            # else, so it starts now, before the hop to the sync round.
            self.data_sync = SYNCS.fdatasync(self.spool._fd)

    def read_back(self) -> bytes:
        """The body's bytes written so far, read back (from the page cache): a body
        that yields its journal is buffered from here on (`herald.broker.append_stream`)."""
        return os.pread(self.spool._fd, self.written, self.at) if self.written else b""

    def group_write(self, registers: LabelSet, now_unix: float) -> StreamedWrite:
        """The whole body's group, for a sync round."""
        assert self.complete
        return StreamedWrite(self, registers, now_unix)


class StreamedWrite(GroupWrite):
    """A `GroupWrite` whose bytes a `SpoolStream` already wrote and hashed: its data
    step only starts the data's fdatasync, its seal waits for the SHA1s."""

    def __init__(self, stream: SpoolStream, registers: LabelSet, now_unix: float) -> None:
        super().__init__(stream.spool, (), registers, now_unix)
        self.stream = stream
        self.size = stream.length
        if stream.data_sync is not None:  # waited for by `finish`, whatever fails first
            self._syncs.append(stream.data_sync)

    def write_data(self, sync: bool = True) -> None:
        spool, stream = self.spool, self.stream
        if stream.error is not None:
            raise stream.error
        assert spool.pending_bytes == 0 and stream.at == spool.content_length
        self._data_at = stream.at
        spool._delta = stream.length  # rolled back with the SHA1 if the group fails
        if sync and stream.data_sync is None:
            self._syncs.append(SYNCS.fdatasync(spool._fd))

    def seal(self) -> None:
        """The SHA1s the stream computed as the body arrived, then the commit line
        (in place or logged: every round seals through here)."""
        running, body_sum = self.stream.sums.result()
        self.spool._sha1 = running
        super().seal()  # hashes nothing: no contents
        self._sums = [body_sum]

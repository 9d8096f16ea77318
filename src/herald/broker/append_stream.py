"""A large plain append streamed into its journal's spool as its body arrives.

When a ``PUT`` of at least `STREAM_MIN_BYTES` reaches the fast path
(`herald.broker.front`) and its journal is idle — no append queued or in flight,
the spool lock free, no replication pipeline — the connection takes the spool
lock at once and writes each piece of the body into the spool as it arrives
(`herald.fragment.spool_stream`); at the last byte the group joins the next sync
round and is answered once its bytes and commit line are durable [I-APPEND-3].
A journal that is busy, or any precondition not met, gets ``None``: the body is
then buffered and queued as before.

    stream = StreamedAppend.start(journal, content_length)   # None: buffer instead
    stream.write(piece) ...                                  # as the body arrives
    future = stream.finish()  # or stream.abandon(): cut short, late, shut down

While a body streams, other appends to the journal wait in its queue (the lock is
held), as Gazette's own appends hold the journal's pipeline while their body
streams — but for `YIELD_AFTER_S` at most: a body still arriving by then *yields*
the journal. The bytes it wrote are read back from the page cache and handed to
its connection (``on_yield``), which buffers the rest and queues the whole body
like any other, behind the appends that waited; a slow client cannot hold a
journal for the whole body timeout. An abandoned or yielded body appends nothing
and leaves the spool's committed end and SHA1 as they were [I-APPEND-2].
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from herald.broker.group import AppendCommit
from herald.broker.metrics import METRICS
from herald.fragment.spool_stream import STREAM_MIN_BYTES, SpoolStream

if TYPE_CHECKING:
    from herald.broker.journal import Journal

__all__ = ["STREAM_MIN_BYTES", "YIELD_AFTER_S", "StreamedAppend"]

#: How long appends queued behind a streaming body wait for it at most: a 1 MiB
#: body arrives in about a millisecond over a LAN; one that takes longer than this
#: comes from a slow client, whose journal is given back to the others.
YIELD_AFTER_S = 0.05


class StreamedAppend:
    """One streamed body and the journal resources it holds until it commits or is
    abandoned: the spool lock and the spool's pinned descriptors. Loop only."""

    def __init__(self, journal: Journal, stream: SpoolStream) -> None:
        self.journal, self.stream = journal, stream
        self._held = True
        #: Given the bytes written so far if the body yields the journal (see the
        #: module doc); the connection then buffers the rest.
        self.on_yield: Callable[[bytes], None] | None = None
        self._loop = asyncio.get_running_loop()
        self._started = self._loop.time()
        self._yield_timer: asyncio.TimerHandle | None = None
        journal.streaming = self

    @classmethod
    def start(cls, journal: Journal, length: int) -> StreamedAppend | None:
        """Take ``journal``'s spool for a body of ``length`` bytes if it is idle, else
        None (the caller buffers the body and queues it, as any append)."""
        if length < STREAM_MIN_BYTES or (spool := journal.try_take_spool()) is None:
            return None
        # Never open files on the loop: a spool not yet created or whose descriptors
        # the pool closed takes the queued path (whose round thread opens them).
        if not spool.pin_if_open():
            journal.release_spool()
            return None
        return cls(journal, SpoolStream(spool, length))

    def write(self, piece: bytes) -> None:
        self.stream.write(piece)

    async def _commit(self) -> AppendCommit:
        outcome = "failed"
        try:
            commit = await self.journal.commit_streamed(self.stream)
            outcome = "committed"
            return commit
        finally:
            METRICS.streamed_appends.labels(outcome).inc()
            self._release()

    def finish(self) -> asyncio.Future[AppendCommit]:
        """The whole body is written: commit it in the next sync round; the future
        resolves once it is durable [I-APPEND-3], or with the error that failed it."""
        self._stop_yielding()
        return asyncio.ensure_future(self._commit())

    def others_waiting(self) -> None:
        """An append (or a poke) was queued behind this body: yield the journal
        once the body has streamed for `YIELD_AFTER_S` (now, if it already has)."""
        if not self._held or self.on_yield is None or self.stream.error is not None:
            return  # a failed write cannot be read back: the body finishes and fails
        due = self._started + YIELD_AFTER_S
        if self._loop.time() >= due:
            self._yield()
        elif self._yield_timer is None:
            self._yield_timer = self._loop.call_at(due, self._yield)

    def _yield(self) -> None:
        self._yield_timer = None
        if not self._held or self.on_yield is None:
            return
        try:
            received = self.stream.read_back()
        except OSError:  # kept: the body then finishes (or fails) as it is
            return
        METRICS.streamed_appends.labels("yielded").inc()
        on_yield = self.on_yield
        self._release()
        on_yield(received)

    def abandon(self) -> None:
        """The body will not complete (connection lost, too late, shutting down):
        append nothing, free the journal. Idempotent."""
        if self._held:
            METRICS.streamed_appends.labels("abandoned").inc()
        self._release()

    def _stop_yielding(self) -> None:
        if self.journal.streaming is self:
            self.journal.streaming = None
        if self._yield_timer is not None:
            self._yield_timer.cancel()
            self._yield_timer = None

    def _release(self) -> None:
        self._stop_yielding()
        if self._held:
            self._held = False
            self.stream.spool.unpin()
            self.journal.release_spool()


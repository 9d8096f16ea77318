"""`AppendService`: many small appends per journal become few PUTs.

Each journal has an *append slot* (a lock) and a batch being filled. A writer takes
the slot (`start_append`), writes into the batch, and releases it; the bytes of one
slot hold are never split or interleaved with another's [I-APPEND-1]. A sender
thread per journal seals the batch (when it passes ``max_batch_bytes``, after
``linger_s``, or on `flush`) and PUTs sealed batches one at a time, so a journal's
batches commit in the order they were filled. Transient failures (unreachable
broker, 5xx-class statuses) are retried with backoff; each batch starts fresh, so
no failure is ever cached as permanent (Gazette issue #462).

    service = AppendService(client)
    future = service.append("example/journal", b'{"Msg": "hi"}\\n')
    with service.start_append("example/journal") as slot:   # e.g. a Publisher:
        slot.write(frame(uuid_drawn_now()))                  # UUID order = write order
    service.flush()
    future.result()   # the AppendResult of the batch that carried those bytes
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, wait
from dataclasses import dataclass, field

from herald.client.broker import BrokerClient
from herald.client.models import AppendResult
from herald.client.plain_write import PlainAppends, plain_appends_possible
from herald.client.transient import retry_transient
from herald.protocol.errors import HeraldError, Status

__all__ = ["AppendService", "AppendSlot"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Batch:
    """A batch's bytes as pieces: ``bytearray``s this service filled (copied
    writes, one piece while they come in a row) and owned buffers, as handed over."""

    pieces: list[bytearray | memoryview] = field(default_factory=list)
    size: int = 0
    future: Future = field(default_factory=Future)
    appends: int = 0

    def mark(self) -> tuple[int, int, int]:
        last = self.pieces[-1] if self.pieces else None
        return len(self.pieces), len(last) if isinstance(last, bytearray) else -1, self.size

    def rollback(self, mark: tuple[int, int, int]) -> None:
        """Drop what was written since ``mark``."""
        count, last_length, self.size = mark
        del self.pieces[count:]
        last = self.pieces[-1] if last_length >= 0 else None
        if isinstance(last, bytearray):
            del last[last_length:]

    def content(self) -> bytes:
        return b"".join(self.pieces)


class AppendSlot:
    """A held append slot: `write` bytes into the journal's current batch.
    ``future`` resolves to that batch's `AppendResult` once it is durable."""

    def __init__(self, batch: _Batch) -> None:
        self._batch = batch

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` into the batch (the caller may reuse its buffer)."""
        pieces = self._batch.pieces
        if pieces and isinstance(pieces[-1], bytearray):
            last = pieces[-1]
            before = len(last)
            last += data
            self._batch.size += len(last) - before
        else:
            pieces.append(bytearray(data))
            self._batch.size += len(pieces[-1])

    def write_owned(self, data: bytes | memoryview) -> None:
        """Put ``data`` into the batch as it is, not copied: the caller hands it
        over and never changes it (an Arrow result). A sender with a connection
        per journal sends it from there (`herald.client.plain_write`); otherwise
        the batch is joined into one ``bytes`` to send, as copied writes are."""
        view = memoryview(data).cast("B")
        self._batch.pieces.append(view)
        self._batch.size += len(view)

    @property
    def future(self) -> Future:
        return self._batch.future


class _JournalQueue:
    def __init__(self) -> None:
        self.slot = threading.Lock()          # the append slot; guards `pending`.
        self.pending: _Batch | None = None
        self.cond = threading.Condition()     # guards `ready`, `last`, flags.
        self.ready: deque[_Batch] = deque()
        self.last: _Batch | None = None       # the newest sealed batch.
        self.thread: threading.Thread | None = None
        self.conn: PlainAppends | None = None  # the sender's own (connection_per_journal)

    def has_pending(self) -> bool:
        batch = self.pending  # read without the slot: only a wake-up hint.
        return batch is not None and batch.size > 0


class AppendService:
    """Batches appends per journal in background threads (one per journal in use).

    ``append`` and ``start_append`` are thread-safe and return at once; results come
    on futures. A batch failing with a non-transient error (412, 404, 413…) fails
    only its own future. ``close`` flushes and stops the threads; the client stays
    open (it is the caller's).

    With ``connection_per_journal`` and an ``http://`` client (no proxy), each
    sender thread PUTs over a plain connection of its own
    (`herald.client.plain_write.PlainAppends`, closed when the thread ends): no
    httpx, and a batch's pieces go out in one gathered write, uncopied — the
    Spark sink's choice (issue 15). Other calls still use ``client``.
    """

    def __init__(self, client: BrokerClient, max_batch_bytes: int = 1 << 20, linger_s: float = 0.005,
                 retry_deadline_s: float = 300.0, connection_per_journal: bool = False) -> None:
        self.client = client
        self.max_batch_bytes, self.linger_s, self.retry_deadline_s = max_batch_bytes, linger_s, retry_deadline_s
        self.connection_per_journal = connection_per_journal and plain_appends_possible(client.address)
        self._queues: dict[str, _JournalQueue] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._stats = {"appends": 0, "batches": 0, "bytes": 0, "retries": 0, "failed_batches": 0}

    def statistics(self) -> dict[str, int]:
        """Counts of appends taken, batches PUT, bytes committed, retries, failures."""
        return dict(self._stats)

    # -- writers ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def start_append(self, journal: str) -> Iterator[AppendSlot]:
        """Hold ``journal``'s append slot while writing into its batch. Writes made
        inside commit together, in order, after all earlier slot holds. If the block
        raises, its writes are discarded."""
        if self._closed:
            raise HeraldError(Status.CLIENT_CLOSED_REQUEST, "AppendService is closed")
        q = self._queue(journal)
        with q.slot:
            if q.pending is None:
                q.pending = _Batch()
            batch = q.pending
            mark = batch.mark()
            try:
                yield AppendSlot(batch)
            except BaseException:
                batch.rollback(mark)
                raise
            batch.appends += 1
            self._stats["appends"] += 1
            if batch.size >= self.max_batch_bytes:
                self._seal_locked(q)
        with q.cond:
            q.cond.notify_all()

    def append(self, journal: str, data: bytes) -> Future:
        """Queue ``data`` as one whole write; the future gives its batch's result."""
        with self.start_append(journal) as slot:
            slot.write(data)
            return slot.future

    def flush(self, timeout_s: float | None = None) -> None:
        """Send everything written so far and wait until each batch succeeded or
        failed (their futures say which)."""
        futures = []
        for q in list(self._queues.values()):
            with q.slot:
                self._seal_locked(q)
            with q.cond:
                if q.last is not None:
                    futures.append(q.last.future)
                q.cond.notify_all()
        wait(futures, timeout=timeout_s)

    def close(self, timeout_s: float | None = None) -> None:
        """Flush, then stop the sender threads. Idempotent."""
        self.flush(timeout_s)
        self._closed = True
        for q in list(self._queues.values()):
            with q.cond:
                q.cond.notify_all()
            if q.thread is not None:
                q.thread.join(timeout_s)

    def __enter__(self) -> AppendService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------

    def _queue(self, journal: str) -> _JournalQueue:
        with self._lock:
            q = self._queues.get(journal)
            if q is None:
                q = self._queues[journal] = _JournalQueue()
                q.thread = threading.Thread(target=self._sender, args=(journal, q), daemon=True,
                                            name=f"herald-append:{journal}")
                q.thread.start()
            return q

    def _seal_locked(self, q: _JournalQueue) -> None:
        """Move the filling batch to the send queue (the caller holds the slot)."""
        batch, q.pending = q.pending, None
        if batch is None or not batch.size:
            return
        with q.cond:
            q.ready.append(batch)
            q.last = batch
            q.cond.notify_all()

    def _sender(self, journal: str, q: _JournalQueue) -> None:
        if self.connection_per_journal:
            q.conn = PlainAppends(self.client.address, self.client.timeout_s, self.client.security.headers())
        try:
            self._send_batches(journal, q, q.conn)
        finally:
            if q.conn is not None:
                q.conn.close()

    def _send_batches(self, journal: str, q: _JournalQueue, conn: PlainAppends | None) -> None:
        while True:
            with q.cond:
                q.cond.wait_for(lambda: q.ready or q.has_pending() or self._closed)
                if not q.ready and not q.has_pending():
                    return  # closed and idle.
                if not q.ready:  # linger so more writes join this batch.
                    q.cond.wait_for(lambda: q.ready or self._closed, timeout=self.linger_s)
            if not q.ready:
                with q.slot:
                    self._seal_locked(q)
            with q.cond:
                batch = q.ready.popleft() if q.ready else None
            if batch is not None:
                self._send(journal, batch, conn)

    def _send(self, journal: str, batch: _Batch, conn: PlainAppends | None) -> None:
        """PUT ``batch`` (retried through transient failures): its pieces gathered
        on ``conn``, else joined into one body for the client."""
        if conn is not None:
            pieces = batch.pieces
            send = lambda: conn.append(journal, pieces)  # noqa: E731
        else:
            content = batch.content()
            send = lambda: self.client.append(journal, content)  # noqa: E731
        try:
            result: AppendResult = retry_transient(
                send, self.retry_deadline_s, f"journal={journal} append of {batch.size} bytes",
                on_retry=self._count_retry)
        except Exception as err:  # noqa: BLE001 — the batch's future carries it.
            self._stats["failed_batches"] += 1
            log.debug("journal=%s append failed: %s", journal, err)
            batch.future.set_exception(err)
            return
        self._stats["batches"] += 1
        self._stats["bytes"] += batch.size
        batch.future.set_result(result)

    def _count_retry(self, _err: BaseException) -> None:
        self._stats["retries"] += 1

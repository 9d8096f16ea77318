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
from herald.client.transient import retry_transient
from herald.protocol.errors import HeraldError, Status

__all__ = ["AppendService", "AppendSlot"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Batch:
    buffer: bytearray = field(default_factory=bytearray)
    future: Future = field(default_factory=Future)
    appends: int = 0


class AppendSlot:
    """A held append slot: `write` bytes into the journal's current batch.
    ``future`` resolves to that batch's `AppendResult` once it is durable."""

    def __init__(self, batch: _Batch) -> None:
        self._batch = batch

    def write(self, data: bytes | memoryview) -> None:
        self._batch.buffer += data

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

    def has_pending(self) -> bool:
        batch = self.pending  # read without the slot: only a wake-up hint.
        return batch is not None and bool(batch.buffer)


class AppendService:
    """Batches appends per journal in background threads (one per journal in use).

    ``append`` and ``start_append`` are thread-safe and return at once; results come
    on futures. A batch failing with a non-transient error (412, 404, 413…) fails
    only its own future. ``close`` flushes and stops the threads; the client stays
    open (it is the caller's).
    """

    def __init__(self, client: BrokerClient, max_batch_bytes: int = 1 << 20, linger_s: float = 0.005,
                 retry_deadline_s: float = 300.0) -> None:
        self.client = client
        self.max_batch_bytes, self.linger_s, self.retry_deadline_s = max_batch_bytes, linger_s, retry_deadline_s
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
            mark = len(batch.buffer)
            try:
                yield AppendSlot(batch)
            except BaseException:
                del batch.buffer[mark:]
                raise
            batch.appends += 1
            self._stats["appends"] += 1
            if len(batch.buffer) >= self.max_batch_bytes:
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
        if batch is None or not batch.buffer:
            return
        with q.cond:
            q.ready.append(batch)
            q.last = batch
            q.cond.notify_all()

    def _sender(self, journal: str, q: _JournalQueue) -> None:
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
                self._send(journal, batch)

    def _send(self, journal: str, batch: _Batch) -> None:
        content = bytes(batch.buffer)
        try:
            result: AppendResult = retry_transient(
                lambda: self.client.append(journal, content), self.retry_deadline_s,
                f"journal={journal} append of {len(content)} bytes", on_retry=self._count_retry)
        except Exception as err:  # noqa: BLE001 — the batch's future carries it.
            self._stats["failed_batches"] += 1
            log.debug("journal=%s append failed: %s", journal, err)
            batch.future.set_exception(err)
            return
        self._stats["batches"] += 1
        self._stats["bytes"] += len(content)
        batch.future.set_result(result)

    def _count_retry(self, _err: BaseException) -> None:
        self._stats["retries"] += 1

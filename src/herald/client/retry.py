"""Reads that survive: `RetryReader` (resume at its offset after any transient
failure) and read offload (`read_fragment`, `OffloadReader`): persisted fragments
are read straight from their store, only the unpersisted tail through the broker
(gazette-facts §4.8), so replays cost the broker almost nothing.

    reader = RetryReader(client, "example/journal", offset=0, block=False)
    for offset, chunk in reader:          # ends at the write head (block=False)
        ...
    reader.jumped                         # [(from, to)] offset jumps over pruned ranges
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit
from urllib.request import url2pathname

import httpx

from herald.client.broker import BrokerClient, Reader
from herald.client.models import FragmentInfo, ReadHead
from herald.fragment.codecs import Decompressor, decompressing_reader
from herald.fragment.stores import open_store
from herald.protocol.errors import HeraldError, OffsetNotYetAvailableError, Status
from herald.protocol.fragment import Fragment, parse_content_path

__all__ = ["Backoff", "OffloadReader", "RetryReader", "is_transient", "read_fragment"]

log = logging.getLogger(__name__)

TRANSIENT_STATUSES = frozenset({
    Status.NO_JOURNAL_PRIMARY_BROKER, Status.NOT_JOURNAL_PRIMARY_BROKER,
    Status.INSUFFICIENT_JOURNAL_BROKERS, Status.NOT_JOURNAL_BROKER,
    Status.FRAGMENT_STORE_UNHEALTHY, Status.INTERNAL,
})
#: Statuses retried a bounded number of times, then raised: a fragment missing from
#: its store may be restored or re-listed soon, but a reader must not wait silently.
BOUNDED_STATUSES = frozenset({Status.FRAGMENT_MISSING})
MAX_STALLED_OPENS = 6
HTTP_CHUNK_BYTES = 1 << 20


T = TypeVar("T")


def is_transient(err: BaseException) -> bool:
    """Worth retrying: the broker was unreachable or answered a 5xx-class status.
    Never cached: the next attempt starts fresh (Gazette issue #462)."""
    if isinstance(err, httpx.TransportError):
        return True
    return isinstance(err, HeraldError) and err.status in TRANSIENT_STATUSES


def retry_transient(call: Callable[[], T], deadline_s: float, what: str,
                    on_retry: Callable[[BaseException], None] | None = None) -> T:
    """``call()``, again after each transient broker error (`is_transient`) until
    ``deadline_s`` has passed: a fail-over's leases and re-assignment take seconds,
    and a peerset briefly short of its replication refuses appends meanwhile.
    ``on_retry`` sees each error that is retried (for counters). Only for calls
    whose repetition is acceptable: reads, ACK intents (readers ignore repeats),
    and at-least-once appends (AppendService, the CLI), where a response lost after
    the commit duplicates the content, as in Gazette's AppendService."""
    backoff, deadline = Backoff(), time.monotonic() + deadline_s
    while True:
        try:
            return call()
        except Exception as err:  # noqa: BLE001 - only transient errors are retried; others raise
            if not is_transient(err) or time.monotonic() > deadline:
                raise
            log.warning("%s failed (retrying): %s", what, err)
            if on_retry is not None:
                on_retry(err)
            backoff.wait()


class Backoff:
    """Exponential delays (``initial_s`` doubling to ``max_s``); `wait` returns early
    (False) once `cancel` is called, so closing a reader never waits out a delay."""

    def __init__(self, initial_s: float = 0.05, max_s: float = 2.0) -> None:
        self.initial_s, self.max_s = initial_s, max_s
        self.attempt = 0
        self._cancelled = threading.Event()

    def wait(self) -> bool:
        delay = min(self.max_s, self.initial_s * (2 ** self.attempt))
        self.attempt += 1
        return not self._cancelled.wait(delay)

    def reset(self) -> None:
        self.attempt = 0

    def cancel(self) -> None:
        self._cancelled.set()


# -- read offload --------------------------------------------------------------------------


def _local_path(location: str) -> str | None:
    parts = urlsplit(location)
    if parts.scheme != "file":
        return None
    return url2pathname(parts.path)


def _raw_chunks(location: str) -> Iterator[bytes]:
    """The stored (still compressed) bytes at a ``file://`` path or an HTTP(S) URL."""
    path = _local_path(location)
    if path is not None:
        with open(path, "rb") as f:
            while chunk := f.read(HTTP_CHUNK_BYTES):
                yield chunk
        return
    # iter_raw: we decompress per the fragment's codec ourselves, whatever
    # Content-Encoding the store claims (Gazette forces identity for GZIP_OFFLOAD).
    with httpx.stream("GET", location, timeout=60, headers={"Accept-Encoding": "identity"}) as resp:
        if resp.status_code != 200:
            raise HeraldError(Status.FRAGMENT_STORE_UNHEALTHY,
                              f"fragment store answered HTTP {resp.status_code} for a signed URL")
        yield from resp.iter_raw(HTTP_CHUNK_BYTES)


def _decompressed(raw: Iterator[bytes], fragment: Fragment) -> Iterator[bytes]:
    decompressor = Decompressor(fragment.codec)
    for chunk in raw:
        if out := decompressor.decompress(chunk):
            yield out
    if out := decompressor.finish():
        yield out


def read_fragment(info: FragmentInfo, file_root: str | os.PathLike | None = None) -> Iterator[bytes]:
    """The decompressed content of a persisted fragment, straight from its store:
    its signed URL over HTTP, a ``file://`` location read from local disk, or (with
    ``file_root``, where the broker's ``file:///`` stores resolve) the store itself.
    Blocks on I/O; raises `HeraldError` if the fragment cannot be reached."""
    fragment = info.fragment
    if info.signed_url:
        return _decompressed(_raw_chunks(info.signed_url), fragment)
    if fragment.store and file_root is not None and fragment.store.startswith("file://"):
        store = open_store(fragment.store, file_root)
        return _store_chunks(store, fragment)
    raise HeraldError(Status.FRAGMENT_STORE_UNHEALTHY,
                      f"no signed URL or local store root to read {fragment.content_name}")


def _store_chunks(store: Any, fragment: Fragment) -> Iterator[bytes]:
    with store.open(fragment.content_path) as f:
        yield from decompressing_reader(f, fragment.codec)


def slice_chunks(chunks: Iterator[bytes], begin: int, offset: int, limit: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` of the part of a fragment's content (starting at journal
    offset ``begin``) that lies in ``[offset, limit)``."""
    pos = begin
    for chunk in chunks:
        lo, hi = max(offset - pos, 0), min(limit - pos, len(chunk))
        if hi > lo:
            yield pos + lo, chunk[lo:hi]
        pos += len(chunk)
        if pos >= limit:
            return


def _offloadable(head: ReadHead, journal: str) -> Fragment | None:
    """The persisted fragment at ``head.offset``, if the client can read it directly."""
    if not head.fragment_location or not head.fragment_name or head.offset >= head.write_head:
        return None
    path = _local_path(head.fragment_location)
    if path is not None and not os.access(path, os.R_OK):
        return None  # a file:// location on the broker's disk that we don't share.
    if path is None and urlsplit(head.fragment_location).scheme not in ("http", "https"):
        return None
    return parse_content_path(journal, head.fragment_name)


# -- retrying reader -----------------------------------------------------------------------


class RetryReader:
    """Iterate ``(offset, chunk)`` of a journal from ``offset`` (−1 = write head),
    reopening the read at ``.offset`` after a broken connection or a transient
    status, with `Backoff`. Offset jumps are logged and followed (``.jumped``).

    At the write head: with ``block`` it waits for new appends (forever, across
    broker restarts); without, iteration stops. ``end_offset`` (0 = none) stops it
    early. With ``offload``, persisted fragments are read from their stores
    (`OffloadReader`). Blocks on I/O; runs in the calling thread.
    """

    def __init__(self, client: BrokerClient, journal: str, offset: int = 0, block: bool = True,
                 end_offset: int = 0, *, offload: bool = False) -> None:
        self.client, self.journal = client, journal
        self.offset, self.block, self.end_offset = offset, block, end_offset
        self.offload = offload
        self.jumped: list[tuple[int, int]] = []
        self.backoff = Backoff()
        self._reader: Reader | None = None
        self._chunks: Iterator[tuple[int, bytes]] | None = None
        self._closed = False
        self._stats = {"opens": 0, "retries": 0, "offloaded_bytes": 0, "broker_bytes": 0}

    def statistics(self) -> dict[str, int]:
        """Opens, retries, and bytes read from stores directly vs. through the broker."""
        return dict(self._stats)

    def __iter__(self) -> RetryReader:
        return self

    def __next__(self) -> tuple[int, bytes]:
        if self._chunks is None:
            self._chunks = self._run()
        return next(self._chunks)

    def _done(self) -> bool:
        return bool(self.end_offset) and self.offset >= self.end_offset

    def _run(self) -> Iterator[tuple[int, bytes]]:
        stalled = 0  # consecutive opens that moved the offset not at all
        while not self._done() and not self._closed:
            start = self.offset
            try:
                reached_head = yield from self._attempt()
                if reached_head and not self.block:
                    return
                if not reached_head and self.offset == start:
                    # Ended early with nothing read (a store failing mid-stream):
                    # reopening at once would spin, so it counts as a failed attempt.
                    stalled += 1
                    self._give_up_after(stalled, HeraldError(
                        Status.FRAGMENT_STORE_UNHEALTHY,
                        f"read of {self.journal} at {self.offset} made no progress", "offset"))
                else:
                    stalled = 0
                if self.block and not self.backoff.wait():
                    return  # the broker ended a blocking read (stopping): reopen.
            except OffsetNotYetAvailableError:
                if not self.block:
                    return
            except (httpx.TransportError, HeraldError) as err:
                if self._closed:
                    return
                if isinstance(err, HeraldError) and err.status in BOUNDED_STATUSES:
                    stalled += 1
                    self._give_up_after(stalled, err)
                elif not is_transient(err):
                    raise
                self._stats["retries"] += 1
                log.warning("journal=%s offset=%d read failed (retrying): %s", self.journal, self.offset, err)
                if not self.backoff.wait():
                    return

    def _give_up_after(self, stalled: int, err: HeraldError) -> None:
        """Raise ``err`` once ``MAX_STALLED_OPENS`` opens in a row made no progress:
        content missing from a store may be restored (or the broker's index refreshed)
        within a few back-offs, but not by retrying forever."""
        if stalled >= MAX_STALLED_OPENS:
            raise err

    def _attempt(self) -> Iterator[tuple[int, bytes]]:
        """One open: offloaded fragments first, then the broker. Returns True when a
        non-blocking read reached the write head it was opened at."""
        self._stats["opens"] += 1
        if self.offload:
            yield from self._offloaded()
            if self._done():
                return True
        self._reader = reader = self.client.read(self.journal, self.offset, self.end_offset, self.block)
        try:
            reader.open()
            self._note_jump(reader)
            self.offset = reader.offset  # resolves -1; follows a jump.
            for offset, chunk in reader:
                self._note_jump(reader)
                self.offset = offset + len(chunk)
                self._stats["broker_bytes"] += len(chunk)
                self.backoff.reset()
                yield offset, chunk
        finally:
            reader.close()
        head = reader.head
        return head is not None and self.offset >= head.write_head

    def _note_jump(self, reader: Reader) -> None:
        for jump in reader.jumped:
            if jump not in self.jumped:
                self.jumped.append(jump)

    def _offloaded(self) -> Iterator[tuple[int, bytes]]:
        """Read persisted fragments from their stores while the broker says the
        content at ``.offset`` is in one the client can reach."""
        while not self._done():
            head = self.client.head(self.journal, self.offset)
            if self.offset >= 0 and head.offset > self.offset:
                log.warning("journal=%s offset jump from %d to %d", self.journal, self.offset, head.offset)
                self.jumped.append((self.offset, head.offset))
            self.offset = head.offset
            fragment = _offloadable(head, self.journal)
            if fragment is None:
                return
            limit = min(fragment.end, self.end_offset) if self.end_offset else fragment.end
            log.debug("journal=%s offset=%d reading %s from its store", self.journal, self.offset,
                      head.fragment_location)
            chunks = _decompressed(_raw_chunks(head.fragment_location or ""), fragment)
            for offset, chunk in slice_chunks(chunks, fragment.begin, self.offset, limit):
                self.offset = offset + len(chunk)
                self._stats["offloaded_bytes"] += len(chunk)
                self.backoff.reset()
                yield offset, chunk

    def close(self) -> None:
        """Stop: a waiting backoff returns, the open read is closed, iteration ends.
        Safe to call from another thread."""
        self._closed = True
        self.backoff.cancel()
        if self._reader is not None:
            self._reader.close()

    def __enter__(self) -> RetryReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OffloadReader(RetryReader):
    """A `RetryReader` with read offload on: persisted fragments come straight from
    their stores (signed URLs, or ``file://`` paths readable here), the rest from
    the broker. Yields exactly the bytes a broker read would."""

    def __init__(self, client: BrokerClient, journal: str, offset: int = 0, block: bool = True,
                 end_offset: int = 0) -> None:
        super().__init__(client, journal, offset, block, end_offset, offload=True)

"""Reads that survive: `RetryReader` resumes at its offset after any transient
failure and follows offset jumps; with read offload on (`OffloadReader`),
persisted fragments are read straight from their stores (`herald.client.offload`),
only the unpersisted tail through the broker (gazette-facts §4.8), so replays cost
the broker almost nothing.

    reader = RetryReader(client, "example/journal", offset=0, block=False)
    for offset, chunk in reader:          # ends at the write head (block=False)
        ...
    reader.jumped                         # [(from, to)] offset jumps over pruned ranges
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from herald.client.broker import BrokerClient, Reader
from herald.client.offload import fragment_chunks, offloadable, slice_chunks
from herald.client.transient import Backoff, is_transient
from herald.protocol.errors import HeraldError, OffsetNotYetAvailableError, Status

__all__ = ["OffloadReader", "RetryReader"]

log = logging.getLogger(__name__)

#: Statuses retried a bounded number of times, then raised: a fragment missing from
#: its store may be restored or re-listed soon, but a reader must not wait silently.
BOUNDED_STATUSES = frozenset({Status.FRAGMENT_MISSING})
MAX_STALLED_OPENS = 6


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
            except Exception as err:  # noqa: BLE001 - what is_transient calls transient, and HeraldErrors
                if not isinstance(err, HeraldError) and not is_transient(err):
                    raise  # httpx's TransportErrors are transient; nothing else is retried
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
            fragment = offloadable(head, self.journal)
            if fragment is None:
                return
            limit = min(fragment.end, self.end_offset) if self.end_offset else fragment.end
            log.debug("journal=%s offset=%d reading %s from its store", self.journal, self.offset,
                      head.fragment_location)
            chunks = fragment_chunks(head.fragment_location or "", fragment)
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

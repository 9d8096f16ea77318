"""Where a read of format ``herald`` starts and ends, and what counts as data loss
(Kafka's ``startingOffsets``, ``endingOffsets`` and ``failOnDataLoss``).

Offsets are journal byte offsets, normally message boundaries: a row's ``end``, a
stream checkpoint's offset, or 0. A ``startingOffsets`` offset inside a record is
moved to the next record boundary (`record_start`), as Gazette's readers
resynchronise: a line framing's next record begins after a newline, a fixed
frame at its magic word. Without it a read would decode the torn rest of a
record as a message. ``earliest`` is the first byte a journal still
holds (after retention pruned older fragments), ``latest`` its write head when the
read is planned. A journal absent from a JSON object starts at ``earliest`` and ends
at ``latest``; ``-2`` and ``-1`` name them explicitly.

Data loss: bytes a read was asked for that no longer exist — a start below the first
byte held (pruned), which the broker answers by jumping forward. With
``failOnDataLoss`` (the default, as Kafka's) that is an error naming the journal and
the lost range; with ``false`` it is a warning and the read goes on after the gap.
Offset 0 is ``earliest`` and never data loss (a journal whose start was pruned is
read from what remains, as a new Kafka consumer reads from the log start).

Write heads (`selected_heads`) are asked for on every trigger (an availableNow
run: once, at its start; its later triggers only list the journals,
`selected_types`), so a stream's driver meets cluster fail-overs: a journal without
a primary for a few seconds is retried through, not a failed query.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from herald.client import BrokerClient, RetryReader
from herald.client.transient import retry_transient
from herald.message.framing import FIXED_MAGIC, FixedFraming, content_type_of
from herald.protocol.errors import HeraldError, Status
from herald.spark.reading import Piece

if TYPE_CHECKING:
    from herald.spark.options import HeraldOptions

__all__ = ["DataLossError", "check_data_loss", "clip_pieces", "held_range", "journal_range", "record_boundary",
           "record_start", "selected_heads", "selected_types"]

log = logging.getLogger(__name__)
EARLIEST, LATEST = -2, -1
#: How long a driver retries write heads through transient broker errors (a
#: fail-over's leases are seconds) before the query fails.
HEADS_DEADLINE_S = 60.0


def selected_heads(opts: HeraldOptions) -> tuple[dict[str, str], dict[str, int]]:
    """Content type and write head of each journal ``opts.selector`` picks, retried
    through transient broker errors for up to `HEADS_DEADLINE_S`."""
    def heads() -> tuple[dict[str, str], dict[str, int]]:
        with opts.client(plain=True) as client:  # a source runner's calls: no httpx (herald.client.plain)
            types = _content_types(client, opts.selector)
            return types, {journal: client.write_head(journal) for journal in types}

    return retry_transient(heads, HEADS_DEADLINE_S, "write heads")


def selected_types(opts: HeraldOptions) -> dict[str, str]:
    """Content type of each journal ``opts.selector`` picks: `selected_heads`'
    listing alone (one round trip, no HEAD per journal), retried as it is."""
    def types() -> dict[str, str]:
        with opts.client(plain=True) as client:
            return _content_types(client, opts.selector)

    return retry_transient(types, HEADS_DEADLINE_S, "list journals")


def _content_types(client: BrokerClient, selector: str) -> dict[str, str]:
    return {info.name: content_type_of(info.spec.labels) for info in client.list(selector)}


class DataLossError(HeraldError):
    """Bytes the read was asked for are gone (pruned); ``failOnDataLoss=false`` reads on."""

    def __init__(self, journal: str, begin: int, end: int) -> None:
        super().__init__(Status.FRAGMENT_MISSING,
                         f"{journal}: bytes [{begin}, {end}) no longer exist (pruned by the journal's "
                         "fragment.retention); read from a later offset, or set failOnDataLoss=false to "
                         "skip them", "failOnDataLoss")


def _pick(spec: str | dict[str, int], journal: str, default: int) -> int:
    if isinstance(spec, str):
        return EARLIEST if spec == "earliest" else LATEST
    return spec.get(journal, default)


def journal_range(starting: str | dict[str, int], ending: str | dict[str, int], journal: str,
                  first: int, head: int) -> tuple[int, int]:
    """``[begin, end)`` to read of ``journal``, whose bytes are ``[first, head)``."""
    begin = _pick(starting, journal, EARLIEST)
    end = _pick(ending, journal, LATEST)
    begin = first if begin == EARLIEST else head if begin == LATEST else begin
    end = head if end == LATEST else first if end == EARLIEST else min(end, head)
    return begin, max(begin, end)


def clip_pieces(pieces: list[Piece], begin: int, end: int) -> list[Piece]:
    """The parts of ``pieces`` inside ``[begin, end)`` (a piece's store read slices
    from any offset, so clipping needs no new plan)."""
    out = []
    for piece in pieces:
        lo, hi = max(piece.begin, begin), min(piece.end, end)
        if lo < hi:
            out.append(Piece(piece.journal, lo, hi, piece.fragment))
    return out


def held_range(journal: str, begin: int, end: int, first: int, fail: bool) -> tuple[int, int]:
    """``[begin, end)`` moved past bytes pruned below ``first`` (the first byte held):
    `DataLossError` if ``fail``, else a warning. Offset 0 is never a loss."""
    if 0 < begin < first and begin < end:
        if fail:
            raise DataLossError(journal, begin, min(first, end))
        log.warning("journal=%s bytes [%d, %d) no longer exist; reading from %d (failOnDataLoss=false)",
                    journal, begin, first, first)
    return (max(begin, first), max(end, first)) if begin < first else (begin, end)


def check_data_loss(client: BrokerClient, journal: str, begin: int, end: int, fail: bool) -> int:
    """Where a read of ``[begin, end)`` really starts: ``begin``, or past a pruned
    gap (`DataLossError` if ``fail``, else a warning). Offset 0 is never a loss.
    One HEAD request; runs on the driver."""
    if begin <= 0 or begin >= end:
        return begin
    start = client.head(journal, begin).offset
    if start <= begin:
        return begin
    if fail:
        raise DataLossError(journal, begin, min(start, end))
    log.warning("journal=%s bytes [%d, %d) no longer exist; reading on from %d (failOnDataLoss=false)",
                journal, begin, start, start)
    return min(start, end)


def record_boundary(chunks: Iterable[tuple[int, bytes]], offset: int, content_type: str) -> int | None:
    """The first record boundary at or after ``offset`` in ``chunks``: contiguous
    ``(offset, bytes)`` of the journal from ``offset - 1``. A line framing's record
    begins after a newline (so ``offset`` itself when byte ``offset - 1`` is one),
    a fixed frame at its magic word. Chunks that begin past ``offset - 1`` jumped
    over pruned bytes to a fragment's first byte: ``offset`` is returned as it is
    (the data-loss checks judge the gap). None: no boundary in ``chunks``. Pure."""
    fixed = content_type.split(";", 1)[0].strip().lower() == FixedFraming.content_type
    mark, past, lo = (FIXED_MAGIC, 0, offset) if fixed else (b"\n", 1, offset - 1)
    carry, carry_at = b"", -1
    for at, chunk in chunks:
        if carry_at < 0:  # the first chunk
            if at > offset - 1:
                return offset
            carry_at = at
        buf, buf_at = carry + chunk, carry_at
        pos = buf.find(mark, max(0, lo - buf_at))
        if pos >= 0:
            return buf_at + pos + past
        keep = min(len(buf), len(mark) - 1)
        carry, carry_at = buf[len(buf) - keep:], buf_at + len(buf) - keep
    return None


def record_start(client: BrokerClient, journal: str, offset: int, content_type: str) -> int:
    """``offset`` moved to the first record boundary at or after it (`record_boundary`),
    reading from ``offset - 1`` (persisted bytes from their stores) only as far as
    that boundary; the write head if no record begins after ``offset``. Runs on the
    driver, for offsets a user gave (a stream's own offsets are boundaries)."""
    if offset <= 0:
        return offset
    with RetryReader(client, journal, offset - 1, block=False, offload=True) as reader:
        found = record_boundary(reader, offset, content_type)
        reached = reader.offset
    return found if found is not None else max(offset, reached)

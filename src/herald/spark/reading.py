"""Bytes → messages for Spark tasks: plan a journal's byte ranges, decode them,
and sequence them read-committed.

Runs inside Spark tasks (executors) with the sync client built there. A batch
read covers a journal with *pieces*: each persisted fragment is read straight
from its store (signed URL or ``file://``: Gazette's read offload, no broker
load), and whatever is not persisted (the spool, gaps) through the broker.
Fragments begin and end on append boundaries, so every piece starts on a
message boundary and decodes on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from herald.client import BrokerClient, FragmentInfo, RetryReader, read_fragment, slice_chunks
from herald.message import Envelope, Frame, Framing, FramingError, Replay
from herald.message.columnar import scan_ndjson
from herald.message.decode_errors import DecodeErrors
from herald.message.framing import NDJSONFraming
from herald.spark.rows import columns_batch

__all__ = ["Piece", "decode_fragment", "decode_range", "piece_chunks", "plan_pieces", "replayer",
           "scan_batches"]

log = logging.getLogger(__name__)
SIGNATURE_TTL_S = 3600.0
SCAN_BLOCK_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class Piece:
    """Journal bytes ``[begin, end)``: from ``fragment`` (persisted, read from its
    store) or, with ``fragment`` None, through the broker."""

    journal: str
    begin: int
    end: int
    fragment: FragmentInfo | None = None


def plan_pieces(client: BrokerClient, journal: str) -> list[Piece]:
    """Cover ``journal`` from its first fragment to its write head with as few
    pieces as possible, preferring persisted fragments (the longest one holding
    each offset, as the broker's cover set does). Runs on the driver."""
    head = client.write_head(journal)
    infos = client.fragments(journal, signature_ttl_s=SIGNATURE_TTL_S)
    persisted = sorted((i for i in infos if i.fragment.is_persisted and i.signed_url),
                       key=lambda i: (i.fragment.begin, -i.fragment.end))
    pos = min((i.fragment.begin for i in infos), default=0)
    pieces: list[Piece] = []
    while pos < head:
        holding = [i for i in persisted if i.fragment.begin <= pos < i.fragment.end]
        if holding:
            best = max(holding, key=lambda i: i.fragment.end)
            end = min(best.fragment.end, head)
            pieces.append(Piece(journal, pos, end, best))
        else:
            end = min([i.fragment.begin for i in persisted if i.fragment.begin > pos] + [head])
            pieces.append(Piece(journal, pos, end, None))
        pos = end
    return pieces


def _decode(chunks: Iterator[tuple[int, bytes]], framing: Framing, errors: DecodeErrors) -> Iterator[Frame]:
    decoder = framing.decoder()
    for offset, chunk in chunks:
        for event in decoder.feed(chunk, offset):
            if isinstance(event, FramingError):
                on_decode_error(errors, event)
                continue
            yield event


def on_decode_error(errors: DecodeErrors, error: FramingError) -> None:
    """Raise (option ``onDecodeError=fail``, the default) or log and count the skip."""
    errors.handle(error)
    log.warning("journal=%s offset=%d skipped an undecodable message (%d in this task): %s",
                errors.journal, error.offset, errors.skipped, error)


def piece_chunks(client: BrokerClient, piece: Piece) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` of a piece: from its store if persisted, else the broker."""
    if piece.fragment is not None:
        yield from slice_chunks(read_fragment(piece.fragment), piece.fragment.fragment.begin, piece.begin, piece.end)
        return
    with RetryReader(client, piece.journal, piece.begin, block=False, end_offset=piece.end,
                     offload=True) as reader:
        yield from reader


def scan_batches(chunks: Iterator[tuple[int, bytes]], journal: str, framing: NDJSONFraming,
                 errors: DecodeErrors, block_bytes: int = SCAN_BLOCK_BYTES) -> Iterator[pa.RecordBatch]:
    """Read-uncommitted NDJSON pieces as Arrow batches, scanned a block at a time
    with numpy (`herald.message.columnar`): no Python object per message."""
    parts: list[bytes] = []
    size, base = 0, None
    for offset, chunk in chunks:
        base = offset if base is None else base
        parts.append(chunk)
        size += len(chunk)
        if size >= block_bytes:
            buf = b"".join(parts)
            cols, used = scan_ndjson(buf, base, framing)
            _log_errors(errors, cols.errors)
            if len(cols):
                yield columns_batch(journal, cols)
            parts, size, base = [buf[used:]], len(buf) - used, base + used
    buf = b"".join(parts)
    if buf:
        cols, used = scan_ndjson(buf, base, framing)
        _log_errors(errors, cols.errors)
        if len(cols):
            yield columns_batch(journal, cols)
        if used < len(buf):  # pieces end on append boundaries; this is a torn message
            log.warning("journal=%s %d bytes at offset %d end without a newline; skipped",
                        journal, len(buf) - used, base + used)


def _log_errors(errors: DecodeErrors, found) -> None:
    for error in found:
        on_decode_error(errors, error)


def decode_fragment(piece: Piece, framing: Framing, errors: DecodeErrors) -> Iterator[Frame]:
    """Messages of a persisted piece, read from its store (no broker involved)."""
    assert piece.fragment is not None
    chunks = read_fragment(piece.fragment)
    yield from _decode(slice_chunks(chunks, piece.fragment.fragment.begin, piece.begin, piece.end), framing, errors)


def decode_range(client: BrokerClient, journal: str, framing: Framing, begin: int, end: int,
                 errors: DecodeErrors) -> Iterator[Frame]:
    """Messages that *begin* in ``[begin, end)``, ``begin`` being a message
    boundary. ``end`` may fall inside a message (a byte budget cut it there): that
    message is read to its end, so the next range starts after it (the caller
    keeps that resume offset). Persisted content is read from stores."""
    decoder = framing.decoder()
    reader = RetryReader(client, journal, begin, block=False, end_offset=end, offload=True)
    with reader:
        for offset, chunk in reader:
            for event in decoder.feed(chunk, offset):
                if isinstance(event, FramingError):
                    on_decode_error(errors, event)
                else:
                    yield event
    if not decoder.buffered:
        return
    with RetryReader(client, journal, end, block=False, offload=True) as rest:
        for offset, chunk in rest:
            events = decoder.feed(chunk, offset)
            frames = [e for e in events if isinstance(e, Frame)]
            if frames:
                yield frames[0]  # The message straddling ``end``; later ones are the next range's.
                return
    log.warning("journal=%s a message straddling offset %d has no end (content pruned?)", journal, end)


def replayer(client: BrokerClient, framing: Framing, errors: DecodeErrors) -> Replay:
    """Read-uncommitted envelopes of a journal's ``[begin, end)`` (read offload on)."""

    def replay(journal: str, begin: int, end: int) -> Iterator[Envelope]:
        for f in decode_range(client, journal, framing, begin, end, errors):
            yield Envelope(journal, f.begin, f.end, f.uuid, f.value)

    return replay

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
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from herald.client import BrokerClient, FragmentInfo, RetryReader, read_fragment, slice_chunks
from herald.client.transient import Backoff
from herald.message import Checkpoint, Envelope, Frame, Framing, FramingError, Replay, Sequencer
from herald.message.columnar import Columns
from herald.message.decode_errors import DecodeErrors
from herald.message.framing import NDJSONFraming
from herald.message.sequencing import sequence_block
from herald.protocol.errors import HeraldError, Status
from herald.spark.blocks import SCAN_BLOCK_BYTES, BlockScanner, on_decode_error
from herald.spark.rows import RowBuffer, columns_batch, select_rows

__all__ = ["BlockScanner", "Piece", "committed_batches", "decode_fragment", "decode_range", "piece_chunks",
           "plan_pieces", "replayer", "scan_batches", "scan_range", "split_committed"]

log = logging.getLogger(__name__)
SIGNATURE_TTL_S = 3600.0
#: How long a planned range that a broker serves only in part is asked for again
#: (a replica still filling a hole after a fail-over lists its store each minute).
SHORT_READ_DEADLINE_S = 180.0


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


def piece_chunks(client: BrokerClient | None, piece: Piece) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` of a piece: from its store if persisted, else the broker
    (``client`` may be None for a persisted piece)."""
    if piece.fragment is not None:
        yield from slice_chunks(read_fragment(piece.fragment), piece.fragment.fragment.begin, piece.begin, piece.end)
        return
    assert client is not None, "a piece read through the broker needs a client"
    yield from read_through(client, piece.journal, piece.begin, piece.end)


def scan_batches(chunks: Iterable[tuple[int, bytes]], journal: str, framing: NDJSONFraming,
                 errors: DecodeErrors, block_bytes: int = SCAN_BLOCK_BYTES,
                 columns: frozenset[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Read-uncommitted NDJSON pieces as Arrow batches of ``columns`` (None: all),
    scanned a block at a time."""
    scanner = BlockScanner(framing, errors, block_bytes)
    for cols in scanner.scan(chunks):
        yield columns_batch(journal, cols, columns)
    if scanner.buffered:  # pieces end on append boundaries; this is a torn message
        log.warning("journal=%s %d bytes at offset %d end without a newline; skipped",
                    journal, scanner.buffered, scanner.buffered_at)


def read_through(client: BrokerClient, journal: str, begin: int, end: int,
                 deadline_s: float = SHORT_READ_DEADLINE_S) -> Iterator[tuple[int, bytes]]:
    """Chunks of ``[begin, end)``, every byte of it: the range was planned below a
    write head, so it is committed, and a broker that ends the read short (a replica
    still filling a hole below its head after a fail-over answers 416) is asked
    again from where it stopped, with back-off, for up to ``deadline_s``;
    then an error fails the task. Never a silent gap: callers record ``end`` as read."""
    offset, backoff = begin, Backoff(0.1, 5.0)
    deadline = time.monotonic() + deadline_s
    while offset < end:
        with RetryReader(client, journal, offset, block=False, end_offset=end, offload=True) as reader:
            yield from reader
            offset = max(offset, reader.offset)
        if offset >= end:
            return
        if time.monotonic() > deadline:
            raise HeraldError(Status.OFFSET_NOT_YET_AVAILABLE,
                              f"{journal}: committed bytes [{offset}, {end}) were not served within "
                              f"{deadline_s:g}s; the task fails rather than skip them", "offset")
        log.warning("journal=%s read ended at %d below the planned end %d; asking again", journal, offset, end)
        backoff.wait()


def scan_range(client: BrokerClient, journal: str, scanner: BlockScanner, begin: int, end: int) -> Iterator[Columns]:
    """`decode_range` in blocks: the messages that *begin* in ``[begin, end)``,
    reading a message that straddles ``end`` on to its end (``scanner.last_end``
    is then past it). Persisted content is read from stores."""
    yield from scanner.scan(read_through(client, journal, begin, end))
    if not scanner.buffered:
        return
    with RetryReader(client, journal, end, block=False, offload=True) as rest:
        for offset, chunk in rest:
            cut = chunk.find(b"\n")
            scanner.feed(offset, chunk if cut < 0 else chunk[:cut + 1])
            if cut >= 0:
                if (cols := scanner.flush()) is not None:
                    yield cols
                return
    log.warning("journal=%s a message straddling offset %d has no end (content pruned?)", journal, end)


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
    for offset, chunk in read_through(client, journal, begin, end):
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


def committed_batches(journal: str, blocks: Iterable[Columns], seq: Sequencer, replay: Replay,
                      include_acks: bool, columns: frozenset[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Read-committed Arrow batches of scanned blocks [I-SEQ-1]: the Sequencer's
    common case in bulk (`sequence_block`; rows taken from the block's columns),
    envelopes it must decide one by one through a `RowBuffer`, order kept.
    Batches of Herald's ``columns`` (None: all); the sequencing sees every UUID."""
    rows = RowBuffer(journal, columns=columns)
    for cols in blocks:
        whole = None  # The block as one batch, built at its first bulk run.
        for item in sequence_block(journal, cols, seq, replay, include_acks):
            if isinstance(item, np.ndarray):
                if len(item):
                    if (batch := rows.flush()) is not None:
                        yield batch
                    whole = columns_batch(journal, cols, columns) if whole is None else whole
                    yield select_rows(whole, item)
            elif (batch := rows.add(item.begin, item.end, item.uuid, item.value)) is not None:
                yield batch
    if (batch := rows.flush()) is not None:
        yield batch


def split_committed(client: BrokerClient, pieces: list[Piece], framing: NDJSONFraming, errors: DecodeErrors,
                    ring_size: int, split_bytes: int) -> list[tuple[Checkpoint, tuple[Piece, ...]]]:
    """Driver: cut a journal's pieces into read-committed partitions of about
    ``split_bytes`` (at piece boundaries, which are message boundaries), each with
    the Sequencer checkpoint at its first byte. One pass over the journal scans and
    sequences in bulk but builds no rows; a partition then resumes from its
    checkpoint exactly as a streaming slice resumes from its snapshot (a span
    open at its start is replayed from the journal when its ACK comes) [I-SEQ-1].
    Not pruned: the partitions together emit what one pass over the journal would."""
    if split_bytes <= 0 or sum(p.end - p.begin for p in pieces) <= split_bytes:
        return [(Checkpoint({}), tuple(pieces))]
    seq, scanner = Sequencer(ring_size=ring_size), BlockScanner(framing, errors)
    replay, journal = replayer(client, framing, errors), pieces[0].journal
    out: list[tuple[Checkpoint, tuple[Piece, ...]]] = []
    group: list[Piece] = []
    for piece in pieces:
        if not group or sum(p.end - p.begin for p in group) >= split_bytes:
            offsets, states = seq.checkpoint(0)
            group = []
            out.append((Checkpoint(offsets, tuple(states)), ()))
        group.append(piece)
        out[-1] = (out[-1][0], tuple(group))
        if piece is pieces[-1]:
            break  # Nothing follows the last piece: no checkpoint to compute.
        for cols in scanner.scan(piece_chunks(client, piece)):
            for _ in sequence_block(journal, cols, seq, replay, include_acks=True):
                pass
    return out

"""Read-uncommitted batch partitions sized as Spark sizes file splits, cut inside
a fragment where a split ends there (as Hadoop's text input cuts a file).

Spark's file sources split ``totalBytes`` into splits of
``min(maxPartitionBytes, max(openCostInBytes, totalBytes / defaultParallelism))``
(``FilePartition.maxSplitBytes``), so a 20 MB read fills both cores of a
``local[2]`` session instead of one task on one. `split_bytes` applies that rule;
the planner runs in a Python process without a SparkContext, so the parallelism
is ``minPartitions``, else the driver's cores (``local[*]``'s own choice, the
default the stream's slices use: `herald.spark.slices.default_parallelism`).

A partition covering journal offsets ``[a, b)`` of a cut piece emits exactly the
NDJSON records that *begin* in ``[a, b)``: a record begins at the read's first
byte or after a newline. The part before a cut therefore reads on past ``b`` to
finish its last record, and the part after it skips the torn record before its
first newline (`record_chunks`, which reads from ``a - 1``: if that byte is a
newline, ``a`` is a record's first byte and nothing is skipped). Only NDJSON is
cut inside a piece; other framings are cut at piece bounds, which are message
boundaries (fragments hold whole appends).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate

from herald.client import BrokerClient
from herald.spark.reading import Piece, piece_chunks

__all__ = ["OPEN_COST_BYTES", "CutPiece", "even_parts", "part_chunks", "record_chunks", "split_bytes"]

#: Spark's ``spark.sql.files.openCostInBytes``: the smallest split worth a task.
OPEN_COST_BYTES = 4 << 20


def split_bytes(total: int, parallelism: int, max_partition_bytes: int, floor: int = OPEN_COST_BYTES) -> int:
    """Spark's ``maxSplitBytes``: ``min(maxPartitionBytes, max(floor, total / parallelism))``."""
    return max(1, min(max_partition_bytes, max(floor, -(-total // max(1, parallelism)))))


@dataclass(frozen=True, slots=True)
class CutPiece:
    """``piece`` (clipped to the partition's bytes) and how it was cut: ``head_cut``
    when it begins inside the original piece (skip the torn record before the
    first newline), ``read_to`` > ``piece.end`` when it ends inside one (the
    record straddling ``piece.end`` is read on, up to ``read_to`` at most)."""

    piece: Piece
    head_cut: bool = False
    read_to: int = 0

    @property
    def size(self) -> int:
        return self.piece.end - self.piece.begin


def even_parts(pieces: Sequence[Piece], size: int, cuttable: bool) -> list[tuple[CutPiece, ...]]:
    """A journal's contiguous ``pieces`` as ``ceil(bytes / size)`` partitions of
    equal bytes, cut wherever that falls (``cuttable``: NDJSON), else at the
    piece boundary nearest to it. Equal parts, not Spark's ``size``-long splits
    and a short remainder: a 21 MB journal over 2 cores is 2 × 10.5 MB, not
    14 + 7 (the longer task is the read's time)."""
    if not pieces:
        return []
    lengths = [p.end - p.begin for p in pieces]
    starts = list(accumulate(lengths, initial=0))
    total = starts[-1]
    n = max(1, -(-total // max(1, size)))
    targets = [total * k // n for k in range(1, n)]
    if not cuttable:
        inner = starts[1:-1]
        targets = [min(inner, key=lambda b, t=t: abs(b - t)) for t in targets] if inner else []
    edges = sorted({0, *targets, total})
    parts = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        group = []
        for piece, a, b in zip(pieces, starts, starts[1:], strict=False):
            if a < hi and b > lo:
                clo, chi = max(a, lo), min(b, hi)
                part = Piece(piece.journal, piece.begin + clo - a, piece.begin + chi - a, piece.fragment)
                group.append(CutPiece(part, head_cut=clo > a, read_to=piece.end if chi < b else 0))
        parts.append(tuple(group))
    return parts


def record_chunks(chunks: Iterable[tuple[int, bytes]], begin: int, end: int, head_cut: bool,
                  read_on: bool) -> Iterator[tuple[int, bytes]]:
    """The bytes of the records that begin in ``[begin, end)``, from ``chunks`` of
    contiguous journal bytes starting at ``begin - 1`` if ``head_cut`` (else at
    ``begin``, a record's first byte). With ``read_on`` the chunks go on past
    ``end`` and the record straddling it is finished at its newline; without,
    they stop at ``end``. Chunks are consumed lazily: nothing after that
    newline is read."""
    skipping, ended = head_cut, True  # ended: the last byte passed closes a record
    for offset, chunk in chunks:
        lo = 0
        if skipping:
            if (nl := chunk.find(b"\n")) < 0:
                continue
            skipping, lo = False, nl + 1
        if offset + lo >= end:  # nothing begins in [begin, end) from here on
            if read_on and not ended:
                nl = chunk.find(b"\n", lo)
                yield offset + lo, chunk[lo:] if nl < 0 else chunk[lo:nl + 1]
                if nl < 0:
                    continue
            return
        if offset + len(chunk) > end:
            if not read_on:
                yield offset + lo, chunk[lo:end - offset]
                return
            if (nl := chunk.find(b"\n", end - 1 - offset)) >= 0:
                yield offset + lo, chunk[lo:nl + 1]
                return
        if lo < len(chunk):
            yield offset + lo, chunk[lo:] if lo else chunk
            ended = chunk.endswith(b"\n")


def part_chunks(client: BrokerClient | None, piece: Piece, head_cut: bool, read_to: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` of the records that begin in ``piece`` (`record_chunks`):
    a cut piece is read from one byte before it (a compressed fragment is
    decompressed from its start either way) and on to its record's newline."""
    if not head_cut and not read_to:
        return piece_chunks(client, piece)
    span = Piece(piece.journal, piece.begin - 1 if head_cut else piece.begin, read_to or piece.end, piece.fragment)
    return record_chunks(piece_chunks(client, span), piece.begin, piece.end, head_cut, read_to > piece.end)

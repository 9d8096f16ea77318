"""Read-uncommitted batch partitions sized as Spark sizes file splits, cut inside
a fragment when one is larger than a split (as Hadoop's text input cuts a file).

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
cut; other framings keep whole pieces, whose bounds are message boundaries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from herald.client import BrokerClient
from herald.spark.reading import Piece, piece_chunks

__all__ = ["OPEN_COST_BYTES", "CutPiece", "cut_pieces", "packed", "part_chunks", "record_chunks", "split_bytes"]

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


def cut_pieces(pieces: Iterable[Piece], size: int, cuttable: bool) -> list[CutPiece]:
    """Each piece larger than ``size`` cut into equal parts of at most ``size``
    bytes (``cuttable``: NDJSON); other pieces whole."""
    out: list[CutPiece] = []
    for piece in pieces:
        length = piece.end - piece.begin
        n = -(-length // max(1, size)) if cuttable else 1
        if n <= 1:
            out.append(CutPiece(piece))
            continue
        edges = [piece.begin + length * i // n for i in range(n + 1)]
        for i, (lo, hi) in enumerate(zip(edges, edges[1:], strict=False)):
            out.append(CutPiece(Piece(piece.journal, lo, hi, piece.fragment), head_cut=i > 0,
                                read_to=piece.end if hi < piece.end else 0))
    return out


def packed(cuts: list[CutPiece], max_bytes: int) -> list[tuple[CutPiece, ...]]:
    """Consecutive pieces packed into groups of at most ``max_bytes`` (a piece
    larger than that alone), as Spark packs files into partitions: each
    partition costs a task (~60 ms of Spark's overhead here), so small
    fragments are not worth one each."""
    groups: list[list[CutPiece]] = []
    size = 0
    for cut in cuts:
        if not groups or size + cut.size > max_bytes:
            groups.append([])
            size = 0
        groups[-1].append(cut)
        size += cut.size
    return [tuple(g) for g in groups]


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

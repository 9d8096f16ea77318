"""The ``herald`` format: batch and streaming readers (PySpark data source API).

Where each method runs (spark-facts "Where things run"): ``partitions`` /
``initialOffset`` / ``latestOffset`` / ``commit`` on the driver (a long-lived
source-runner process for streams); ``read`` in executor workers from a pickled
reader, so everything ``read`` needs travels in the `InputPartition`.

Read-committed streams keep per-message work in the reader: the task of a
micro-batch for journal bytes ``[start, end)`` loads the sequencer snapshot
saved at ``start``, sequences the bytes (replaying an open span from its begin
when an ACK needs it, as Gazette's recovery does), yields committed messages and
saves the snapshot at ``end`` (see `herald.spark.state` and docs/spark.md).

Each stream query starts a fresh source-runner process that imports this module
only to plan, so what only ``read`` needs loads in ``read``: `herald.spark.keys`
(``pyarrow.compute``, ~40 ms of the runner's start-up).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from herald.client import BrokerClient
from herald.message import Checkpoint, Envelope, Sequencer, framing_for, sequence
from herald.message.decode_errors import DecodeErrors
from herald.message.framing import NDJSONFraming, content_type_of
from herald.spark.budget import row_budget_ends, sampler_of, share_bytes
from herald.spark.cuts import OPEN_COST_BYTES, even_parts, part_chunks, split_bytes
from herald.spark.datasource import HeraldDataSource, lean_http
from herald.spark.kept import kept_client
from herald.spark.offsets import (
    check_data_loss,
    clip_pieces,
    held_range,
    journal_range,
    record_start,
    selected_heads,
    selected_types,
)
from herald.spark.options import HeraldOptions
from herald.spark.projection import built_columns, project
from herald.spark.reading import (
    BlockScanner,
    Piece,
    committed_batches,
    decode_fragment,
    decode_range,
    piece_chunks,
    plan_pieces,
    replayer,
    scan_batches,
    split_committed,
)
from herald.spark.rows import RowBuffer
from herald.spark.slices import (
    MIN_PART_BYTES,
    StreamSlice,
    default_parallelism,
    pack_slices,
    read_slice,
    split_slice,
)
from herald.spark.state import BackgroundSaves, SnapshotStore
from herald.spark.worker_gc import freeze_imports

__all__ = ["HeraldDataSource"]

log = logging.getLogger(__name__)
DEFAULT_CONTENT_TYPE = NDJSONFraming.content_type


def _content_types(client: BrokerClient, selector: str) -> dict[str, str]:
    """Journal name → content type, for the journals ``selector`` picks."""
    return {info.name: content_type_of(info.spec.labels) for info in client.list(selector)}


# -- batch ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchPart:
    """One input partition of a batch read: consecutive pieces of a journal
    (read-uncommitted, up to a Spark-sized split: `herald.spark.cuts`), or a
    journal's pieces in order (read-committed: one sequencer, starting from
    ``checkpoint``, the Sequencer's state at the first piece's begin).
    ``head_cut``: the first piece begins inside a fragment; ``read_to``: the last
    one ends inside a fragment, whose record is read on (NDJSON only)."""

    opts: HeraldOptions
    content_type: str
    pieces: tuple[Piece, ...]
    checkpoint: Checkpoint = Checkpoint({})
    head_cut: bool = False
    read_to: int = 0


class BatchReader(DataSourceReader):
    def __init__(self, opts: HeraldOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        """Driver: list journals and their fragments once; keep what
        ``startingOffsets`` / ``endingOffsets`` select (`herald.spark.offsets`)."""
        with self.opts.client() as client:
            planned = [(journal, content_type, self._in_range(client, journal, content_type,
                                                              plan_pieces(client, journal)))
                       for journal, content_type in sorted(_content_types(client, self.opts.selector).items())]
            total = sum(p.end - p.begin for _, _, pieces in planned for p in pieces)
            if not self.opts.min_partitions:  # Spark's openCostInBytes, a journal for a file
                total += OPEN_COST_BYTES * sum(1 for _, _, pieces in planned if pieces)
            opts = self._sized(total)
            parts: list[InputPartition] = []
            for _journal, content_type, pieces in planned:
                if opts.committed:
                    parts += [InputPartition(BatchPart(opts, content_type, group, checkpoint))
                              for checkpoint, group in self._committed_split(client, content_type, pieces, opts)]
                else:
                    parts += _uncommitted_parts(opts, content_type, pieces, total)
        return parts or [InputPartition(BatchPart(self.opts, DEFAULT_CONTENT_TYPE, ()))]

    def _in_range(self, client: BrokerClient, journal: str, content_type: str,
                  pieces: list[Piece]) -> tuple[Piece, ...]:
        """The pieces ``startingOffsets`` / ``endingOffsets`` select, starting at a
        record boundary (pieces begin on one; an offset inside a piece is moved on
        to the next: `record_start`)."""
        if not pieces:
            return ()
        first, head = pieces[0].begin, pieces[-1].end
        begin, end = journal_range(self.opts.starting, self.opts.ending, journal, first, head)
        begin, end = held_range(journal, begin, end, first, self.opts.fail_on_data_loss)
        if begin < end and all(p.begin != begin for p in pieces):
            begin = min(end, record_start(client, journal, begin, content_type))
        return tuple(clip_pieces(pieces, begin, end))

    def _sized(self, total_bytes: int) -> HeraldOptions:
        """Read-committed NDJSON with ``minPartitions``: splits of total / N bytes,
        so the read has about that many (read-uncommitted: `_uncommitted_parts`)."""
        if not self.opts.min_partitions or not total_bytes or not self.opts.committed:
            return self.opts
        size = max(1, -(-total_bytes // self.opts.min_partitions))
        return replace(self.opts, split_bytes=min(self.opts.split_bytes or size, size))

    def _committed_split(self, client: BrokerClient, content_type: str, pieces: tuple[Piece, ...],
                         opts: HeraldOptions) -> list[tuple[Checkpoint, tuple[Piece, ...]]]:
        """NDJSON journals longer than ``splitBytes`` become several partitions, each
        from a checkpoint computed here (`split_committed`); others one partition."""
        framing = framing_for(content_type, opts.uuid_field)
        if not pieces or not isinstance(framing, NDJSONFraming):
            return [(Checkpoint({}), pieces)]
        return split_committed(client, list(pieces), framing, opts.decode_errors(pieces[0].journal),
                               opts.ring_size, opts.split_bytes)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: decode the partition's pieces into Arrow batches (with keys: `herald.spark.keys`)."""
        from herald.spark.keys import with_keys  # not at import: see the module docstring

        freeze_imports()
        lean_http()  # an executor's first task: httpcore without trio (herald.spark.datasource)
        opts = partition.value.opts
        yield from project(with_keys(self._read_part(partition.value), opts.key_field, opts.json_fields,
                                     opts.dedupe_key), opts)

    def _read_part(self, part: BatchPart) -> Iterator[pa.RecordBatch]:
        if not part.pieces:
            return
        framing = framing_for(part.content_type, part.opts.uuid_field)
        journal = part.pieces[0].journal
        errors = part.opts.decode_errors(journal)
        if isinstance(framing, NDJSONFraming):  # the bulk path: numpy scan, no object per message
            yield from _scan_pieces(part, framing, errors)
            return
        rows = RowBuffer(journal, columns=built_columns(part.opts))
        with part.opts.client() as client:
            frames = (f for piece in part.pieces for f in _piece_frames(client, piece, framing, errors))
            if part.opts.committed:
                seq = Sequencer(ring_size=part.opts.ring_size)
                envelopes = (Envelope(journal, f.begin, f.end, f.uuid, f.value) for f in frames)
                emitted = sequence(envelopes, seq, replayer(client, framing, errors), part.opts.include_acks)
                for env in emitted:
                    if (batch := rows.add(env.begin, env.end, env.uuid, env.value)) is not None:
                        yield batch
            else:
                for f in frames:
                    if (batch := rows.add(f.begin, f.end, f.uuid, f.value)) is not None:
                        yield batch
        if (batch := rows.flush()) is not None:
            yield batch


def _uncommitted_parts(opts: HeraldOptions, content_type: str, pieces: tuple[Piece, ...],
                       total: int) -> list[InputPartition]:
    """A journal's pieces as Spark would split files of the same bytes: parts of
    at most `split_bytes` of the read's ``total`` (``minPartitions``, else the
    driver's cores; each journal counted 4 MiB more, as Spark counts a file's
    ``openCostInBytes``, unless ``minPartitions`` asks), equal in bytes, NDJSON
    pieces cut inside a fragment (`herald.spark.cuts`)."""
    size = split_bytes(total, default_parallelism(opts), opts.max_partition_bytes,
                       1 if opts.min_partitions else OPEN_COST_BYTES)
    cuttable = isinstance(framing_for(content_type, opts.uuid_field), NDJSONFraming)
    return [InputPartition(BatchPart(opts, content_type, tuple(c.piece for c in group),
                                     head_cut=group[0].head_cut, read_to=group[-1].read_to))
            for group in even_parts(pieces, size, cuttable)]


def _scan_pieces(part: BatchPart, framing: NDJSONFraming, errors: DecodeErrors) -> Iterator[pa.RecordBatch]:
    """NDJSON pieces scanned in blocks; read-committed through the bulk Sequencer.
    Persisted pieces come from their stores: no broker client unless needed."""
    journal = part.pieces[0].journal
    needs_client = part.opts.committed or any(p.fragment is None for p in part.pieces)
    with part.opts.client() if needs_client else contextlib.nullcontext() as client:
        if not part.opts.committed:
            last = len(part.pieces) - 1
            for i, piece in enumerate(part.pieces):
                chunks = part_chunks(client, piece, part.head_cut and i == 0, part.read_to if i == last else 0)
                yield from scan_batches(chunks, journal, framing, errors, columns=built_columns(part.opts))
            return
        assert client is not None
        chunks = (chunk for piece in part.pieces for chunk in piece_chunks(client, piece))
        blocks = BlockScanner(framing, errors).scan(chunks)
        seq = Sequencer.from_checkpoint(part.checkpoint, part.opts.ring_size)
        yield from committed_batches(journal, blocks, seq, replayer(client, framing, errors),
                                     part.opts.include_acks, built_columns(part.opts))


def _piece_frames(client: BrokerClient, piece: Piece, framing: object, errors: DecodeErrors) -> Iterator:
    if piece.fragment is not None:
        return decode_fragment(piece, framing, errors)  # type: ignore[arg-type]
    return decode_range(client, piece.journal, framing, piece.begin, piece.end, errors)  # type: ignore[arg-type]


# -- streaming -----------------------------------------------------------------------------


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{journal: byte offset}``. Journals that start matching the
    selector join the stream at offset 0. ``maxBytesPerTrigger`` and
    ``maxRowsPerTrigger`` cap a batch (shared fairly across journals: `herald.spark.budget`)."""

    def __init__(self, opts: HeraldOptions) -> None:
        self.opts = opts
        self._content_types: dict[str, str] = {}
        self._target: dict[str, int] | None = None  # availableNow: heads at start.

    def _heads(self) -> dict[str, int]:
        self._content_types, heads = selected_heads(self.opts)
        return heads

    def initialOffset(self) -> dict:
        """Driver, once per new query: ``startingOffsets``. An availableNow run has
        just listed the heads (`prepareForTriggerAvailableNow` is called first):
        they are used, not listed again (one list and a HEAD per journal less at
        every query start; later heads would be cut back to them anyway)."""
        heads = dict(self._target) if self._target is not None else self._heads()
        start = self.opts.starting
        if start == "earliest":
            return {j: 0 for j in heads}
        if start == "latest":
            return dict(heads)
        assert isinstance(start, dict)
        offsets = {j: (heads[j] if start.get(j, -2) == -1 else max(0, start.get(j, 0))) for j in heads}
        return self._at_records(offsets, heads)

    def _at_records(self, offsets: dict[str, int], heads: dict[str, int]) -> dict[str, int]:
        """Offsets a user gave inside a record moved on to the next record boundary
        (`record_start`): the stream's first batch must not decode a torn record."""
        inside = [j for j, off in offsets.items() if 0 < off < heads[j]]
        if not inside:
            return offsets
        with self.opts.client(plain=True) as client:
            for j in inside:
                offsets[j] = min(heads[j], record_start(client, j, offsets[j], self._content_types.get(
                    j, DEFAULT_CONTENT_TYPE)))
        return offsets

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_rows_per_trigger:  # maxBytesPerTrigger, if set too, applies in latestOffset
            return ReadMaxRows(self.opts.max_rows_per_trigger)
        if self.opts.max_bytes_per_trigger:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Driver: freeze today's write heads as the target (journals created
        later are not read by this run)."""
        self._target = self._heads()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """Driver, once per trigger: the next batch's end offsets."""
        if self._target is None:
            heads = self._heads()
        elif all(int(start.get(j, 0)) >= head for j, head in self._target.items()):
            return dict(start)  # availableNow, all read: the closing checks ask the brokers nothing
        else:
            heads = self._target_heads()
        begin = {j: int(start.get(j, 0)) for j in heads}
        budget = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        if isinstance(limit, ReadMaxRows):
            budget = self.opts.max_bytes_per_trigger or None
        ends = share_bytes(begin, heads, budget)
        if isinstance(limit, ReadMaxRows):
            with self.opts.client() as client:
                ends = row_budget_ends(begin, ends, limit.max_rows, sampler_of(client))
        end = dict(start)  # Journals no longer selected keep their offset.
        end.update(ends)
        return end

    def _target_heads(self) -> dict[str, int]:
        """availableNow: the heads frozen at the run's start, of the journals still
        selected. A write head only grows, so the target is what ``min(head now,
        target)`` gave: one listing per trigger, no HEAD per journal (an availableNow
        run over 16 journals made 3 × 16 of them, ≈ 2-3 ms each under load)."""
        assert self._target is not None
        self._content_types = selected_types(self.opts)
        return {j: head for j, head in self._target.items() if j in self._content_types}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """Driver: one slice per journal with new bytes in this batch, a large one
        cut into parts read in parallel, small ones packed several to a task."""
        slices: list[StreamSlice] = []
        with self.opts.client(plain=True) as client:  # the source runner: no httpx (herald.client.plain)
            for journal in sorted(end):
                lo, hi = int(start.get(journal, 0)) if start else 0, int(end[journal])
                if hi > lo:  # failOnDataLoss: one HEAD when lo > 0 (herald.spark.offsets)
                    lo = check_data_loss(client, journal, lo, hi, self.opts.fail_on_data_loss)
                if hi > lo:
                    if journal not in self._content_types:
                        self._heads()
                    content_type = self._content_types.get(journal, DEFAULT_CONTENT_TYPE)
                    slices.append(StreamSlice(self.opts, journal, content_type, lo, hi))
            parts = self._parts(client, slices)
        return [InputPartition(group)
                for group in pack_slices(parts, default_parallelism(self.opts), self.opts.max_partition_bytes)]

    def _parts(self, client: BrokerClient, slices: list[StreamSlice]) -> list[StreamSlice]:
        """Fewer slices than tasks to fill: cut the large ones (`herald.spark.slices`)."""
        per_slice = default_parallelism(self.opts) // max(1, len(slices))
        min_bytes = self.opts.split_bytes or MIN_PART_BYTES
        return [part for s in slices for part in split_slice(client, s, per_slice, min_bytes)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: journal slices (one, or several small ones packed), each from and
        to its sequencer snapshot, through the worker's kept client; the snapshot
        saves run beside the reading (`BackgroundSaves`)."""
        from herald.spark.keys import with_keys  # not at import: see the module docstring

        freeze_imports()
        lean_http()  # an executor's first task: httpcore without trio (herald.spark.datasource)
        with BackgroundSaves() as saves, kept_client(self.opts, "read") as client:  # the worker's (herald.spark.kept)
            for part in partition.value:
                yield from project(with_keys(read_slice(part, client, saves), part.opts.key_field,
                                             part.opts.json_fields, part.opts.dedupe_key), part.opts)
            saves.wait()  # the task ends only once every snapshot it saved is durable

    def commit(self, end: dict) -> None:
        """Driver (lags one batch): snapshots below a committed end are not needed
        by any future batch or replay."""
        store = SnapshotStore(self.opts.state_location)
        for journal, offset in end.items():
            store.prune(journal, int(offset))

"""A streaming micro-batch's journal slices: how they are cut into tasks and read.

A micro-batch reads each journal's bytes ``[start, end)`` from the sequencer
snapshot saved at ``start`` and saves the one at ``end`` (`herald.spark.state`).
One journal is one Sequencer, so an unsplit slice is one task on one core. A
large read-committed NDJSON slice is therefore cut at fragment boundaries into
*parts* that run as parallel tasks: part ``i`` first runs a *state-only* pass
(scan + bulk Sequencer, no rows, no Arrow: about 70 % of a task's read) from the
snapshot at ``start`` to its cut, which yields exactly the Sequencer state the
previous part reaches there, then reads its own bytes as an unsplit slice would.
Only the last part saves the snapshot at ``end``. Exact by the same argument as
``splitBytes`` [I-SEQ-1]: a span open at a cut is pending in the earlier part and
replayed from its begin by the later one when its ACK comes; the parts together
yield what one task over ``[start, end)`` yields, in the same order.

Cuts leave earlier parts more bytes (they do no state-only pass), so all parts
finish together (`cut_offsets`). The other way round, more slices than tasks to
fill (many journals, small batches) are *packed* several to a task
(`pack_slices`), as Spark packs small files: each task costs 80-120 ms of
Spark's overhead here whatever it reads, which a 16-journal micro-batch paid 16
times. A packed task reads its slices one after another, each exactly as alone.
"""

from __future__ import annotations

import contextlib
import heapq
import os
from collections.abc import Generator, Iterator
from dataclasses import dataclass

import pyarrow as pa

from herald.client import BrokerClient
from herald.message import Checkpoint, Envelope, Framing, Sequencer, duration_to_clock, framing_for, sequence
from herald.message.decode_errors import DecodeErrors
from herald.message.framing import NDJSONFraming
from herald.message.sequencing import sequence_block
from herald.spark.options import HeraldOptions
from herald.spark.projection import built_columns
from herald.spark.reading import BlockScanner, committed_batches, decode_range, replayer, scan_range
from herald.spark.rows import RowBuffer, columns_batch
from herald.spark.state import BackgroundSaves, Snapshot, SnapshotStore

__all__ = ["MIN_PART_BYTES", "StreamSlice", "cut_offsets", "default_parallelism", "pack_slices", "read_slice",
           "split_slice"]

PRUNE_HORIZON_CLOCK = duration_to_clock(24 * 3600 * 10**9)  # Gazette consumers' 24 h.
#: Smallest part worth a task of its own (option ``splitBytes`` overrides it for streams).
#: A part beyond the first costs a task (80-120 ms of Spark's here), often a cold
#: Python worker, and a state-only pass over the bytes before it, so a slice is cut
#: only when it holds ≥ 2 × 32 MiB: measured in the same runs (2 cores), a 20 MiB
#: slice read 0.76× as fast split in two as in one task, a 112 MiB one 1.05-1.2×.
MIN_PART_BYTES = 32 << 20
#: Cost of the state-only pass per byte, relative to a task's full read: measured
#: 0.8-1.0 of a direct read (reading, snappy and the numpy scan dominate both),
#: which leaves out the task's Arrow hand-off to the JVM (docs/spark.md).
STATE_PASS_COST = 0.7
#: A task's fixed cost counted in bytes when slices are packed (as Spark's
#: ``spark.sql.files.openCostInBytes``): small slices share a task.
TASK_COST_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class StreamSlice:
    """One journal's bytes ``[start, end)`` of one micro-batch; a part of it
    yields only the messages of ``[part_begin, part_end)`` (0 = the slice's own
    bound), after a state-only pass from ``start`` to ``part_begin``."""

    opts: HeraldOptions
    journal: str
    content_type: str
    start: int
    end: int
    part_begin: int = 0
    part_end: int = 0

    @property
    def emit_begin(self) -> int:
        return max(self.start, self.part_begin)

    @property
    def emit_end(self) -> int:
        return self.part_end or self.end

    @property
    def is_last_part(self) -> bool:
        return self.emit_end >= self.end


def split_slice(client: BrokerClient, s: StreamSlice, parts: int, min_part_bytes: int) -> list[StreamSlice]:
    """``s`` as up to ``parts`` parts cut at fragment boundaries (message
    boundaries: fragments hold whole appends), each at least ``min_part_bytes``;
    ``[s]`` when it is not worth it or the framing is not bulk NDJSON."""
    size = s.end - s.start
    parts = min(parts, size // max(1, min_part_bytes))
    framing = framing_for(s.content_type, s.opts.uuid_field)
    if parts < 2 or not s.opts.committed or not isinstance(framing, NDJSONFraming):
        return [s]
    bounds = sorted({b for info in client.fragments(s.journal)
                     for b in (info.fragment.begin, info.fragment.end) if s.start < b < s.end})
    cuts = sorted({min(bounds, key=lambda b, w=want: abs(b - w))
                   for want in cut_offsets(s.start, s.end, parts)} if bounds else set())
    edges = [s.start, *cuts, s.end]
    return [StreamSlice(s.opts, s.journal, s.content_type, s.start, s.end, lo if lo > s.start else 0,
                        hi if hi < s.end else 0) for lo, hi in zip(edges, edges[1:], strict=False)]


def cut_offsets(start: int, end: int, parts: int, pass_cost: float = STATE_PASS_COST) -> list[int]:
    """Where to cut ``[start, end)`` into ``parts`` so every part costs the same:
    a part beginning ``b`` bytes in costs ``pass_cost * b`` (its state-only pass)
    plus its own bytes. With ``C`` the common cost, ``b' = b + C - pass_cost * b``;
    ``C`` is found by bisection so the last part ends at ``end``."""
    size = end - start

    def reach(cost: float) -> float:
        b = 0.0
        for _ in range(parts):
            b += cost - pass_cost * b
        return b

    lo, hi = size / parts * 0.5, float(size)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if reach(mid) < size else (lo, mid)
    cuts, b = [], 0.0
    for _ in range(parts - 1):
        b += hi - pass_cost * b
        cuts.append(start + int(b))
    return cuts


def pack_slices(slices: list[StreamSlice], tasks: int, max_bytes: int) -> list[tuple[StreamSlice, ...]]:
    """``slices`` in groups, one task each: alone while there are no more than
    ``tasks``; else packed into ``tasks`` groups (more if a group would pass
    ``max_bytes``), largest first into the lightest group, each slice counted
    with `TASK_COST_BYTES`: a batch still fills ``tasks`` cores evenly, but
    small slices no longer cost a task each."""
    if len(slices) <= tasks:
        return [(s,) for s in slices]
    costs = [(s.emit_end - s.emit_begin + TASK_COST_BYTES, i, s) for i, s in enumerate(slices)]
    count = min(len(slices), max(tasks, -(-sum(c for c, _, _ in costs) // max(1, max_bytes))))
    groups: list[list[StreamSlice]] = [[] for _ in range(count)]
    lightest = [(0, g) for g in range(count)]  # (bytes so far, group): a heap
    for cost, _, s in sorted(costs, key=lambda c: (-c[0], c[1])):
        filled, g = heapq.heappop(lightest)
        groups[g].append(s)
        heapq.heappush(lightest, (filled + cost, g))
    return [tuple(g) for g in groups if g]


def default_parallelism(opts: HeraldOptions) -> int:
    """Tasks a micro-batch should fill: ``minPartitions``, else the driver's cores
    (``local[*]``'s own choice; on a cluster, set ``minPartitions``)."""
    return opts.min_partitions or os.cpu_count() or 1


def read_slice(s: StreamSlice, client: BrokerClient | None = None,
               saves: BackgroundSaves | None = None) -> Iterator[pa.RecordBatch]:
    """Read ``[s.start, s.end)`` (or one part of it) from the snapshot at
    ``start``; the last part saves the one at ``end`` (a task that dies earlier
    may have saved it or not: either way its retry starts over from the snapshot
    at ``start`` and writes the same one). ``client``: a read task's kept client
    (`herald.spark.kept`; None: one of its own). Without ``saves`` the save runs
    after the last row is yielded; with a task's `BackgroundSaves` it starts as
    soon as the end state is known, before the last batch is yielded, and the
    task awaits it before it ends."""
    store = SnapshotStore(s.opts.state_location)
    held: pa.RecordBatch | None = None  # One batch behind: the last goes out after the save starts.
    with s.opts.client() if client is None else contextlib.nullcontext(client) as reader:
        batches = _slice_batches(s, store, reader)
        while True:
            try:
                batch = next(batches)
            except StopIteration as done:
                end_snapshot = done.value
                break
            if held is not None:
                yield held
            held = batch
    if end_snapshot is not None and saves is not None:
        saves.save(store, s.journal, s.end, end_snapshot)
    if held is not None:
        yield held
    if end_snapshot is not None and saves is None:
        store.save(s.journal, s.end, end_snapshot)


def _slice_batches(s: StreamSlice, store: SnapshotStore,
                   client: BrokerClient) -> Generator[pa.RecordBatch, None, Snapshot | None]:
    """The slice's batches; returns the snapshot at ``end`` (None unless the last part)."""
    snap = store.load(s.journal, s.start) or Snapshot(s.start, Checkpoint({}))
    framing = framing_for(s.content_type, s.opts.uuid_field)
    resume = max(snap.resume, s.start)
    seq = Sequencer.from_checkpoint(snap.checkpoint, s.opts.ring_size)
    errors = s.opts.decode_errors(s.journal)
    if s.emit_begin > resume:
        assert isinstance(framing, NDJSONFraming), "only NDJSON slices are split"
        resume, seq = _state_pass(s, client, framing, errors, seq, resume, s.emit_begin)
    if isinstance(framing, NDJSONFraming):
        last_end = yield from _scan_slice(s, client, framing, errors, seq, resume)
    else:
        last_end = yield from _decode_slice(s, client, framing, errors, seq, resume)
    if not s.is_last_part:
        return None
    offsets, states = seq.checkpoint(PRUNE_HORIZON_CLOCK)
    resume = max(resume, s.end, last_end)  # Past a message straddling ``end``.
    return Snapshot(resume, Checkpoint(offsets, tuple(states)))


def _state_pass(s: StreamSlice, client: BrokerClient, framing: NDJSONFraming, errors: DecodeErrors,
                seq: Sequencer, resume: int, cut: int) -> tuple[int, Sequencer]:
    """Sequence ``[resume, cut)`` yielding nothing, scanning no values: returns
    where this part's reading starts (past a message straddling ``cut``, which the
    previous part yields) and the Sequencer state the previous part reaches at
    ``cut``, as a checkpoint carries it: without the ring, whose envelopes this
    pass left without values, so a span open at ``cut`` is replayed from the
    journal at its ACK, as across micro-batches."""
    scanner = BlockScanner(framing, errors, values=False)
    replay = replayer(client, framing, errors)
    for cols in scan_range(client, s.journal, scanner, resume, cut):
        for _ in sequence_block(s.journal, cols, seq, replay, s.opts.include_acks):
            pass
    offsets, states = seq.checkpoint(0)
    return max(cut, scanner.last_end), Sequencer.from_checkpoint(Checkpoint(offsets, tuple(states)), s.opts.ring_size)


def _scan_slice(s: StreamSlice, client: BrokerClient, framing: NDJSONFraming, errors: DecodeErrors,
                seq: Sequencer, resume: int) -> Generator[pa.RecordBatch, None, int]:
    """NDJSON: blocks scanned with numpy, sequenced in bulk; returns the end of the last message."""
    scanner = BlockScanner(framing, errors)
    end = s.emit_end
    blocks = scan_range(client, s.journal, scanner, resume, end) if resume < end else iter(())
    if s.opts.committed:
        yield from committed_batches(s.journal, blocks, seq, replayer(client, framing, errors), s.opts.include_acks,
                                     built_columns(s.opts))
    else:
        for cols in blocks:
            yield columns_batch(s.journal, cols, built_columns(s.opts))
    return scanner.last_end


def _decode_slice(s: StreamSlice, client: BrokerClient, framing: Framing, errors: DecodeErrors,
                  seq: Sequencer, resume: int) -> Generator[pa.RecordBatch, None, int]:
    """Other framings (never split): one `Frame` per message, sequenced one by one."""
    rows = RowBuffer(s.journal, columns=built_columns(s.opts))
    frames = _Tracked(decode_range(client, s.journal, framing, resume, s.end, errors)
                      if resume < s.end else iter(()))
    if s.opts.committed:
        envelopes = (Envelope(s.journal, f.begin, f.end, f.uuid, f.value) for f in frames)
        out = ((e.begin, e.end, e.uuid, e.value) for e in sequence(
            envelopes, seq, replayer(client, framing, errors), s.opts.include_acks))
    else:
        out = ((f.begin, f.end, f.uuid, f.value) for f in frames)
    for row in out:
        if (batch := rows.add(*row)) is not None:
            yield batch
    if (batch := rows.flush()) is not None:
        yield batch
    return frames.last_end


class _Tracked:
    """Iterates frames, remembering the end of the last one."""

    def __init__(self, frames: Iterator) -> None:
        self._frames, self.last_end = frames, 0

    def __iter__(self) -> _Tracked:
        return self

    def __next__(self):  # noqa: ANN204
        f = next(self._frames)
        self.last_end = f.end
        return f

"""Gazette's Sequencer: read-uncommitted envelopes in, read-committed messages out.

The read-uncommitted stream of a journal interleaves producers and holds
duplicates, open transactions and rolled-back ones. The Sequencer keeps, per
(journal, producer), the last ACK clock, the largest clock of the open span and
the offset where that span began, plus a ring buffer of recent envelopes. A
producer's span is released the moment its ACK is read, even while other
producers' spans stay open: no head-of-line blocking (gazette-facts §2).

Driving it (what ``ReadCommittedIter`` and the consumer do)::

    outcome = seq.queue_uncommitted(env)
    if outcome is QueueOutcome.ACK_COMMIT_REPLAY:
        journal, begin, end = seq.replay_range()
        seq.start_replay(read_uncommitted(journal, begin, end))
    while seq.step():
        handle(seq.dequeued)        # the ACK itself comes last, as in Gazette

Offsets advance past a committed sequence only once it is fully dequeued, so a
crash mid-dequeue re-reads the ACK and re-emits the remainder ([I-SEQ-1]).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator, Mapping

from herald.message.checkpoint import Checkpoint, ProducerState
from herald.message.outcomes import (
    DUPLICATE_OUTCOMES,
    NO_PRODUCER,
    SPAN_OUTCOMES,
    Envelope,
    QueueOutcome,
    ReplayError,
)
from herald.message.uuid import ACK_TXN, CONTINUE_TXN, OUTSIDE_TXN, flags_str
from herald.protocol.errors import ValidationError

__all__ = ["Checkpoint", "Envelope", "ProducerState", "QueueOutcome", "ReplayError", "Sequencer"]

log = logging.getLogger(__name__)
_unpack = struct.Struct(">IHHH6s").unpack  # The UUID layout, as in uuid.parse_uuid.


# Enum class attribute access is slow; the hot path uses these module aliases.
(_OUT_ACKED, _OUT_COMMIT, _CONT_ACKED, _CONT_LARGER, _CONT_BEGIN, _CONT_EXTEND,
 _ACK_ROLLBACK, _ACK_EMPTY, _ACK_RING, _ACK_REPLAY) = tuple(QueueOutcome)


class _Partial:
    """An open (or just committed) sequence of one journal + producer."""

    __slots__ = ("journal", "producer", "min_clock", "max_clock", "begin", "ring_start", "ring_stop")

    def __init__(self, journal: str, producer: bytes, last_ack: int, begin: int) -> None:
        self.journal, self.producer = journal, producer
        self.min_clock = last_ack  # Exclusive: clocks <= this are duplicates.
        self.max_clock = last_ack  # Inclusive: largest clock of the open span.
        self.begin = begin  # Offset of the span's first byte, or -1.
        self.ring_start = self.ring_stop = -1  # Inclusive ring indices, or -1.

    def reset(self, clock: int) -> None:
        self.min_clock = self.max_clock = clock
        self.begin = self.ring_start = self.ring_stop = -1


class Sequencer:
    """Sequences read-uncommitted envelopes into read-committed ones. Pure, not
    thread-safe; built from a checkpoint's offsets and producer states."""

    def __init__(
        self, offsets: Mapping[str, int] | None = None, states: Iterable[ProducerState] = (), ring_size: int = 8192
    ) -> None:
        size = max(1, ring_size)
        self.offsets: dict[str, int] = dict(offsets or {})
        self.dequeued: Envelope | None = None
        self._dequeued_clock = 0
        self._last: Envelope | None = None  # Last envelope examined by step().
        self._partials: dict[tuple[str, bytes], _Partial] = {}
        self._pending: set[_Partial] = set()
        self._emit: _Partial | None = None
        self._replay: Iterator[Envelope] | None = None
        self._ring: list[Envelope | None] = [None] * size
        self._ring_clock = [0] * size
        self._ring_key: list[tuple[str, bytes] | None] = [None] * size
        self._next = [-1] * size
        self._head = 0
        self._counts = [0] * len(QueueOutcome)
        for s in states:
            self._partials[(s.journal, bytes(s.producer))] = _Partial(s.journal, bytes(s.producer), s.last_ack, s.begin)

    @classmethod
    def from_checkpoint(cls, checkpoint: Checkpoint, ring_size: int = 8192) -> Sequencer:
        return cls(checkpoint.offsets, checkpoint.states, ring_size)

    # ------------------------------------------------------------ queueing

    def queue_uncommitted(self, env: Envelope) -> QueueOutcome:
        """Apply the next read-uncommitted envelope (§2.2). Raises RuntimeError if a
        committed sequence is still being dequeued."""
        if self._emit is not None:
            raise RuntimeError("committed messages remain to dequeue")
        self._evict_at_head()
        uuid = env.uuid
        if uuid is None:
            producer, clock, flags = NO_PRODUCER, 0, OUTSIDE_TXN
        elif len(uuid) == 16:  # parse_uuid, inlined: this runs per message.
            low, mid, hi, seq, producer = _unpack(uuid)
            clock = (low << 4) | (mid << 36) | ((hi & 0x0FFF) << 52) | ((seq >> 10) & 0xF)
            flags = seq & 0x3FF
        else:
            raise ValidationError(f"envelope at {env.journal}:{env.begin}", f"uuid must be 16 bytes, got {len(uuid)}")
        ring_clock = clock
        partial: _Partial | None
        if clock == 0:
            # Zero clocks (and the zero UUID) commit at once and are not indexed.
            partial = _Partial(env.journal, producer, 0, -1)
            flags, clock = OUTSIDE_TXN, 1
        else:
            partial = self._partials.get((env.journal, producer))
            if partial is None:
                partial = self._partials[(env.journal, producer)] = _Partial(env.journal, producer, clock - 1, -1)
        assert partial is not None
        outcome = self._decide(env, partial, clock, flags)
        self._apply(env, partial, clock, ring_clock, outcome)
        self._counts[outcome] += 1  # A list: IntEnum indexes it.
        return outcome

    def _decide(self, env: Envelope, p: _Partial, clock: int, flags: int) -> QueueOutcome:
        """Gazette's decision table; no state changes here."""
        if flags == CONTINUE_TXN:
            if clock <= p.min_clock:
                return _CONT_ACKED
            if clock <= p.max_clock:
                return _CONT_LARGER
            return _CONT_BEGIN if p.begin == -1 else _CONT_EXTEND
        if flags == ACK_TXN:
            if clock < p.min_clock:
                self._log_error(env, p, "ACK_TXN less than last ACK (loss of exactly-once semantics)")
                return _ACK_ROLLBACK
            if clock == p.min_clock:
                return _ACK_ROLLBACK
            if p.begin == -1:
                return _ACK_EMPTY
            if p.ring_start == -1 or p.begin != self._ring[p.ring_start].begin:  # type: ignore[union-attr]
                return _ACK_REPLAY  # None, or only a trailing part, is in the ring.
            return _ACK_RING
        if flags != OUTSIDE_TXN:
            self._log_error(env, p, f"unexpected UUID flags {flags_str(flags)}; handled as OUTSIDE_TXN")
        if clock <= p.min_clock:
            return _OUT_ACKED
        if p.begin != -1:
            self._log_error(env, p, "OUTSIDE_TXN after CONTINUE_TXN (mixed committed and uncommitted publishing?)")
        return _OUT_COMMIT

    def _apply(self, env: Envelope, p: _Partial, clock: int, ring_clock: int, outcome: QueueOutcome) -> None:
        """Each outcome either sets ``_emit`` or advances offsets — never both."""
        if outcome in DUPLICATE_OUTCOMES:
            self.offsets[env.journal] = env.end  # Duplicate: only read through it.
        elif outcome in SPAN_OUTCOMES:
            if outcome == _CONT_BEGIN:
                p.begin = env.begin
                self._pending.add(p)
            self._add_at_head(env, ring_clock, p)
            p.max_clock = clock
            self.offsets[env.journal] = env.end
        elif outcome == _ACK_ROLLBACK:
            p.reset(clock)  # Discard the open span; the clock may move backwards.
            self._pending.discard(p)
            self.offsets[env.journal] = env.end
        else:
            self._add_at_head(env, ring_clock, p)
            if outcome == _ACK_EMPTY:
                p.begin = env.begin
            elif outcome == _OUT_COMMIT:
                # Any open CONTINUE span is clobbered: treated as rolled back.
                p.begin, p.ring_start = env.begin, p.ring_stop
            p.max_clock = clock  # Commit through clock; larger clocks are dropped.
            self._emit = p  # Offsets advance only once fully dequeued ([I-SEQ-1]).

    # ------------------------------------------------------------ dequeue

    def step(self) -> bool:
        """Move to the next committed envelope (``dequeued``); False when the
        committed sequence is done (then offsets move past it) or there is none.

        Raises RuntimeError if a replay was required and not started, and
        ReplayError if the replay iterator strays outside ``replay_range()``.
        """
        emit = self._emit
        if emit is None:
            return False
        if self.dequeued is None and self._replay is None and emit.begin != self._ring[emit.ring_start].begin:  # type: ignore[union-attr]
            raise RuntimeError("caller was required to start_replay, and didn't")
        if self.dequeued is not None:
            emit.min_clock = self._dequeued_clock  # Processed: checkpointable progress.
        self.dequeued = None
        while emit.ring_start != -1:
            if self._replay is None:
                slot = emit.ring_start
                env, clock = self._ring[slot], self._ring_clock[slot]
                emit.ring_start = self._next[slot]
            else:
                env = next(self._replay, None)
                if env is None:
                    self._replay = None  # Replay done: continue from the ring.
                    continue
                self._check_replay(env, emit)
                if env.producer != emit.producer:
                    continue  # Replayed bytes interleave other producers.
                clock = env.clock
            self._last = env
            if (clock != 0 and clock <= emit.min_clock) or clock > emit.max_clock:
                continue  # A duplicate, or rolled back by the ACK.
            emit.begin = env.begin  # type: ignore[union-attr]
            self.dequeued, self._dequeued_clock = env, clock
            return True
        self._finish(emit)
        return False

    def _check_replay(self, env: Envelope, emit: _Partial) -> None:
        stop = self._ring[emit.ring_start].begin  # type: ignore[union-attr]
        if env.journal != emit.journal:
            raise ReplayError(f"replay of wrong journal ({env.journal}; expected {emit.journal})")
        if env.begin < emit.begin:
            raise ReplayError(f"replay has wrong begin ({env.begin}; expected >= {emit.begin})")
        if env.end > stop:
            raise ReplayError(f"replay has wrong end ({env.end}; expected <= {stop})")

    def _finish(self, emit: _Partial) -> None:
        """The sequence is fully dequeued: now read through its last envelope."""
        self.offsets[emit.journal] = self._last.end  # type: ignore[union-attr]
        emit.reset(emit.min_clock)
        self._pending.discard(emit)
        self._emit = self._last = None
        self._dequeued_clock = 0

    def replay_range(self) -> tuple[str, int, int]:
        """``(journal, begin, end)`` of bytes to re-read for the committed span;
        RuntimeError if nothing is being dequeued."""
        if self._emit is None:
            raise RuntimeError("no committed sequence to replay")
        return self._emit.journal, self._emit.begin, self._ring[self._emit.ring_start].begin  # type: ignore[union-attr]

    def start_replay(self, envelopes: Iterable[Envelope]) -> None:
        """Supply read-uncommitted envelopes of exactly ``replay_range()``."""
        if self._emit is None:
            raise RuntimeError("no committed sequence to replay")
        self._replay = iter(envelopes)

    # ------------------------------------------------------------ state

    def has_pending(self) -> bool:
        """True if a span was started or extended since the last checkpoint: an
        ACK is probably coming, so a consumer transaction may wait for it."""
        return bool(self._pending)

    def checkpoint(self, prune_horizon_clock: int = 0) -> tuple[dict[str, int], list[ProducerState]]:
        """Offsets and producer states to persist (§2.5); clears ``has_pending``.

        Producers whose max clock is older than the journal's newest last-ACK
        minus ``prune_horizon_clock`` (Clock units, see ``duration_to_clock``;
        0 disables; consumers use 24 h) are dropped. Unlike Go's uint64 the
        bound floors at zero; Go's sub-100 ns horizons (0 ticks, yet on) have no
        equivalent here.
        States are sorted so a replayed batch checkpoints identically.
        """
        newest: dict[str, int] = {}
        for (journal, _), p in self._partials.items():
            newest[journal] = max(newest.get(journal, 0), p.min_clock)
        states: list[ProducerState] = []
        for key, p in sorted(self._partials.items()):
            bound = max(0, newest[key[0]] - prune_horizon_clock) if prune_horizon_clock > 0 else 0
            if p.max_clock >= bound:
                states.append(ProducerState(p.journal, p.producer, p.min_clock, p.begin))
            else:
                del self._partials[key]
        self._pending.clear()
        return dict(self.offsets), states

    # ------------------------------------------------------------ bulk (herald.message.sequencing)

    def producer_state(self, journal: str, producer: bytes) -> tuple[int, bool] | None:
        """``(last ACK clock, has an open span)`` of a tracked producer, else None."""
        p = self._partials.get((journal, producer))
        return None if p is None else (p.min_clock, p.begin != -1)

    def apply_committed(self, journal: str, last_clocks: Mapping[bytes, int], read_through: int,
                        outcomes: Mapping[QueueOutcome, int]) -> None:
        """Record a run of envelopes decided in bulk, as if each had been queued and
        dequeued here: every producer in ``last_clocks`` ends with no open span and
        its last ACK at that clock; offsets read through ``read_through``. Only
        valid between sequences (nothing being dequeued)."""
        if self._emit is not None:
            raise RuntimeError("committed messages remain to dequeue")
        for producer, clock in last_clocks.items():
            p = self._partials.get((journal, producer))
            if p is None:
                p = self._partials[(journal, producer)] = _Partial(journal, producer, clock, -1)
            p.reset(clock)
            self._pending.discard(p)
        self.offsets[journal] = read_through
        for outcome, count in outcomes.items():
            self._counts[outcome] += count

    def statistics(self) -> dict[str, int]:
        """Outcome counts by Gazette's metric label, plus tracked producers."""
        stats = {o.label: self._counts[o] for o in QueueOutcome}
        stats["producers"] = len(self._partials)
        return stats

    # ------------------------------------------------------------ ring

    def _evict_at_head(self) -> None:
        env = self._ring[self._head]
        if env is None:
            return
        p = self._partials.get(self._ring_key[self._head])  # type: ignore[arg-type]
        if p is not None and p.ring_start == self._head:
            if p.ring_start == p.ring_stop:
                p.ring_start = p.ring_stop = -1  # Its only entry.
            else:
                p.ring_start = self._next[p.ring_start]
        self._ring[self._head], self._next[self._head] = None, -1

    def _add_at_head(self, env: Envelope, clock: int, p: _Partial) -> None:
        head = self._head
        self._ring[head], self._ring_clock[head], self._next[head] = env, clock, -1
        self._ring_key[head] = (p.journal, p.producer)
        if p.ring_stop == -1:
            p.ring_start = head
        else:
            self._next[p.ring_stop] = head
        p.ring_stop = head
        self._head = (head + 1) % len(self._ring)

    def _log_error(self, env: Envelope, p: _Partial, message: str) -> None:
        log.error(
            "%s journal=%s begin=%d end=%d producer=%s min_clock=%d max_clock=%d begin_offset=%d",
            message, env.journal, env.begin, env.end, p.producer.hex(), p.min_clock, p.max_clock, p.begin,
        )

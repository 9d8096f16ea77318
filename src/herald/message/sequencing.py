"""The read-committed loop: read-uncommitted envelopes in, committed ones out.

Every read-committed reader — `herald.client.read_committed`, the Spark source,
test models — drives the `Sequencer` the same way: queue each envelope, start the
replay the Sequencer asks for when an ACK commits messages that fell out of its
ring, and dequeue what it releases. That loop lives here, once; the caller
supplies only how to read a byte range back (``replay``). Pure: no I/O of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from herald.message.columnar import Columns, uuid_fields
from herald.message.sequencer import Envelope, QueueOutcome, Sequencer
from herald.message.uuid import ACK_TXN, CONTINUE_TXN, OUTSIDE_TXN

__all__ = ["BulkPlan", "Replay", "is_ack", "plan_bulk", "sequence", "sequence_block"]

_OUT_COMMIT = QueueOutcome.OUTSIDE_COMMIT

#: ``(journal, begin, end) -> envelopes`` of that byte range, read-uncommitted.
Replay = Callable[[str, int, int], Iterable[Envelope]]


def is_ack(env: Envelope) -> bool:
    """True for an ACK_TXN message (it carries no event)."""
    return env.uuid is not None and env.flags == ACK_TXN


def sequence(envelopes: Iterable[Envelope], seq: Sequencer, replay: Replay,
             include_acks: bool = True) -> Iterator[Envelope]:
    """Committed envelopes of ``envelopes``, each exactly once [I-SEQ-1]; ACKs too
    unless ``include_acks`` is false (Gazette delivers them last in a sequence)."""
    for env in envelopes:
        outcome = seq.queue_uncommitted(env)
        if not outcome.is_commit:
            continue
        if outcome is QueueOutcome.ACK_COMMIT_REPLAY:
            seq.start_replay(replay(*seq.replay_range()))
        while seq.step():
            committed = seq.dequeued
            assert committed is not None  # step() returned True: a message was dequeued
            if include_acks or not is_ack(committed):
                yield committed


# -- the vectorised common case ------------------------------------------------------------

#: After a bulk plan stops short, the exact Sequencer takes at least this many
#: envelopes (doubling while bulk keeps failing, up to ``_MAX_EXACT``), so a block
#: full of rollbacks or interleaved open spans costs O(n), not O(n²) plans.
_MIN_EXACT, _MAX_EXACT = 64, 1 << 16


@dataclass(frozen=True, slots=True)
class BulkPlan:
    """What `plan_bulk` decided for rows ``[0, prefix)`` of a block: ``order`` are
    the rows to emit in emission order; ``last_clocks`` each producer's last clock
    (its ACK or committed message); ``outcomes`` what `Sequencer.statistics` counts."""

    prefix: int
    order: np.ndarray
    last_clocks: dict[bytes, int]
    outcomes: dict[QueueOutcome, int]


def plan_bulk(producers: np.ndarray, clocks: np.ndarray, flags: np.ndarray, has_uuid: np.ndarray,
              state: Callable[[bytes], tuple[int, bool] | None], include_acks: bool = True) -> BulkPlan:
    """Decide the longest prefix of a block that the Sequencer's common case covers,
    with numpy over the whole block. Pure.

    ``producers`` (int64, the 6-byte ProducerID big-endian), ``clocks`` (uint64),
    ``flags`` and ``has_uuid`` describe the block's envelopes in journal order;
    ``state(producer)`` is the Sequencer's ``producer_state`` for this journal.

    Bulk rules (each gives the outcome the Sequencer would): an envelope without
    UUID or with clock 0 commits at once; otherwise every producer's clocks must
    grow strictly from its last ACK (a new producer: from its first clock), a
    producer must start the block with no open span, flags must be OUTSIDE_TXN,
    CONTINUE_TXN or ACK_TXN, and OUTSIDE_TXN may not follow an open CONTINUE_TXN.
    Then OUTSIDE_TXN commits at once, CONTINUE_TXN opens or extends a span and an
    ACK_TXN commits it (an ACK with no span commits itself). The first envelope
    breaking a rule ends the candidate prefix; the prefix is then cut back to the
    last point where every span opened in it has been committed, so the Sequencer
    is left exactly as the per-message path would leave it. Rollbacks, duplicates
    and spans open at a block's edge are the exact Sequencer's ([I-SEQ-1]).
    """
    n = len(clocks)
    live = np.flatnonzero(has_uuid & (clocks != 0))
    if not len(live):
        order = np.arange(n)
        return BulkPlan(n, _drop_acks(order, flags, has_uuid, include_acks), {}, {_OUT_COMMIT: n})
    uniq, code = np.unique(producers[live], return_inverse=True)
    srt = np.argsort(code, kind="stable")
    group, rows = code[srt], live[srt]  # Envelopes grouped by producer, journal order within.
    clk, flg = clocks[rows], flags[rows]
    first = np.ones(len(rows), dtype=bool)
    first[1:] = group[1:] != group[:-1]
    start, dirty = _initial_state(uniq, clk[first], state)
    prev = np.empty_like(clk)
    prev[1:] = clk[:-1]
    prev[first] = start
    after_cont = np.zeros(len(rows), dtype=bool)  # A span of this producer is open before this row.
    after_cont[1:] = flg[:-1] == CONTINUE_TXN
    after_cont[first] = False
    bad = (clk <= prev) | (flg > ACK_TXN) | (first & dirty[group]) | ((flg == OUTSIDE_TXN) & after_cont)
    stop = int(rows[bad].min()) if bad.any() else n
    opens = np.zeros(n + 1, dtype=np.int64)  # Spans opened minus committed, by row.
    np.add.at(opens, rows[(flg == CONTINUE_TXN) & ~after_cont], 1)
    np.add.at(opens, rows[(flg == ACK_TXN) & after_cont], -1)
    quiet = np.flatnonzero(np.cumsum(opens[:stop]) == 0)
    prefix = int(quiet[-1]) + 1 if len(quiet) else 0
    if not prefix:
        return BulkPlan(0, np.zeros(0, dtype=np.int64), {}, {})
    at = np.arange(n)  # Emission position: a CONTINUE_TXN row is emitted at its ACK.
    cont = flg == CONTINUE_TXN
    closers = np.flatnonzero(~cont)
    if len(closers):
        nxt = np.minimum(np.searchsorted(closers, np.flatnonzero(cont)), len(closers) - 1)
        at[rows[cont]] = rows[closers[nxt]]
    order = np.argsort(at[:prefix], kind="stable")
    inside = rows < prefix
    return BulkPlan(prefix, _drop_acks(order, flags, has_uuid, include_acks),
                    _last_clocks(uniq, group[inside], clk[inside]),
                    _outcomes(prefix, flg[inside], after_cont[inside]))


def _initial_state(uniq: np.ndarray, first_clocks: np.ndarray,
                   state: Callable[[bytes], tuple[int, bool] | None]) -> tuple[np.ndarray, np.ndarray]:
    """Per producer: the clock its next envelope must exceed, and whether it has an
    open span (then bulk cannot start with it)."""
    start = first_clocks - np.uint64(1)  # A new producer: its first clock is new.
    dirty = np.zeros(len(uniq), dtype=bool)
    for k, producer in enumerate(uniq.tolist()):
        known = state(int(producer).to_bytes(6, "big"))
        if known is not None:
            start[k], dirty[k] = known
    return start, dirty


def _last_clocks(uniq: np.ndarray, group: np.ndarray, clk: np.ndarray) -> dict[bytes, int]:
    last = np.ones(len(group), dtype=bool)
    last[:-1] = group[1:] != group[:-1]
    return {int(uniq[g]).to_bytes(6, "big"): int(c) for g, c in zip(group[last].tolist(), clk[last].tolist())}


def _outcomes(prefix: int, flg: np.ndarray, after_cont: np.ndarray) -> dict[QueueOutcome, int]:
    cont, ack = flg == CONTINUE_TXN, flg == ACK_TXN
    counts = {
        QueueOutcome.CONTINUE_BEGIN_SPAN: int((cont & ~after_cont).sum()),
        QueueOutcome.CONTINUE_EXTEND_SPAN: int((cont & after_cont).sum()),
        QueueOutcome.ACK_EMPTY: int((ack & ~after_cont).sum()),
        QueueOutcome.ACK_COMMIT_RING: int((ack & after_cont).sum()),
    }
    counts[QueueOutcome.OUTSIDE_COMMIT] = prefix - sum(counts.values())
    return counts


def _drop_acks(order: np.ndarray, flags: np.ndarray, has_uuid: np.ndarray, include_acks: bool) -> np.ndarray:
    if include_acks:
        return order
    keep: np.ndarray = order[~(has_uuid[order] & (flags[order] == ACK_TXN))]
    return keep


def sequence_block(journal: str, cols: Columns, seq: Sequencer, replay: Replay,
                   include_acks: bool = True) -> Iterator[np.ndarray | Envelope]:
    """Committed envelopes of one scanned block, exactly as `sequence` yields them
    [I-SEQ-1]: the common case in bulk (arrays of the block's rows, in emission
    order), the rest through ``seq`` one envelope at a time (`Envelope` s, which a
    replay may bring from before the block). ``seq`` carries the state from block
    to block and is left as `sequence` would leave it, so it checkpoints alike."""
    producers, clocks, flags = uuid_fields(cols.uuids)
    n, i, exact = len(cols), 0, _MIN_EXACT
    while i < n:
        plan = plan_bulk(producers[i:], clocks[i:], flags[i:], cols.has_uuid[i:],
                         lambda p: seq.producer_state(journal, p), include_acks)
        if plan.prefix:
            seq.apply_committed(journal, plan.last_clocks, int(cols.ends[i + plan.prefix - 1]), plan.outcomes)
            yield plan.order + i
            i += plan.prefix
        if i < n:
            stop = min(n, i + exact)
            yield from sequence((cols.envelope(journal, k) for k in range(i, stop)), seq, replay, include_acks)
            i = stop
            exact = _MIN_EXACT if plan.prefix >= exact else min(2 * exact, _MAX_EXACT)

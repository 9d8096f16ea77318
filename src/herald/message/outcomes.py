"""The Sequencer's vocabulary: the envelope it reads and what it decides for each.

An `Envelope` is one read-uncommitted message with its journal position; a
`QueueOutcome` is the Sequencer's decision for it (Gazette's values and metric
labels), grouped here into commits, duplicates and open spans as the bulk and
per-message paths both need them (`herald.message.sequencer`,
`herald.message.sequencing`).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from herald.message.uuid import parse_uuid
from herald.protocol.errors import HeraldError, Status

__all__ = ["DUPLICATE_OUTCOMES", "NO_PRODUCER", "SPAN_OUTCOMES", "Envelope", "QueueOutcome", "ReplayError"]

#: The producer of a message without a UUID.
NO_PRODUCER = bytes(6)


class Envelope(NamedTuple):
    """A message at journal bytes ``[begin, end)``; ``uuid`` None = zero UUID.

    An immutable NamedTuple rather than a frozen dataclass: readers build one per
    message and it is ~2x cheaper to construct (and pickles for Spark).
    """

    journal: str
    begin: int
    end: int
    uuid: bytes | None
    value: bytes

    @property
    def producer(self) -> bytes:
        return NO_PRODUCER if self.uuid is None else self.uuid[10:16]

    @property
    def clock(self) -> int:
        return 0 if self.uuid is None else parse_uuid(self.uuid)[1]

    @property
    def flags(self) -> int:
        return 0 if self.uuid is None else ((self.uuid[8] << 8) | self.uuid[9]) & 0x3FF


class QueueOutcome(enum.IntEnum):
    """What ``queue_uncommitted`` decided (Gazette's values and metric labels)."""

    OUTSIDE_ALREADY_ACKED = 0
    OUTSIDE_COMMIT = 1
    CONTINUE_ALREADY_ACKED = 2
    CONTINUE_TXN_CLOCK_LARGER = 3
    CONTINUE_BEGIN_SPAN = 4
    CONTINUE_EXTEND_SPAN = 5
    ACK_ROLLBACK = 6
    ACK_EMPTY = 7
    ACK_COMMIT_RING = 8
    ACK_COMMIT_REPLAY = 9

    @property
    def label(self) -> str:
        return _LABELS[self]

    @property
    def is_commit(self) -> bool:
        """True if the caller must now dequeue with ``step()``."""
        return self in _COMMITS


_LABELS = dict(
    zip(
        QueueOutcome,
        ["outsideAlreadyAcked", "outsideCommit", "continueAlreadyAcked", "continueRingClockLarger",
         "continueBeginSpan", "continueExtendSpan", "ackRollback", "ackEmpty", "ackCommitRing", "ackCommitReplay"],
    )
)
_COMMITS = frozenset(
    {QueueOutcome.OUTSIDE_COMMIT, QueueOutcome.ACK_EMPTY, QueueOutcome.ACK_COMMIT_RING, QueueOutcome.ACK_COMMIT_REPLAY}
)


DUPLICATE_OUTCOMES = frozenset(
    {QueueOutcome.OUTSIDE_ALREADY_ACKED, QueueOutcome.CONTINUE_ALREADY_ACKED, QueueOutcome.CONTINUE_TXN_CLOCK_LARGER}
)
SPAN_OUTCOMES = frozenset({QueueOutcome.CONTINUE_BEGIN_SPAN, QueueOutcome.CONTINUE_EXTEND_SPAN})
class ReplayError(HeraldError, ValueError):
    """A replay iterator yielded an envelope outside ``replay_range()``: the
    journal's content does not match what the sequencer saw (MESSAGE_DECODE_ERROR)."""

    def __init__(self, message: str) -> None:
        super().__init__(Status.MESSAGE_DECODE_ERROR, message)

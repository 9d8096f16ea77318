"""The read-committed loop: read-uncommitted envelopes in, committed ones out.

Every read-committed reader — `herald.client.read_committed`, the Spark source,
test models — drives the `Sequencer` the same way: queue each envelope, start the
replay the Sequencer asks for when an ACK commits messages that fell out of its
ring, and dequeue what it releases. That loop lives here, once; the caller
supplies only how to read a byte range back (``replay``). Pure: no I/O of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from herald.message.sequencer import Envelope, QueueOutcome, Sequencer
from herald.message.uuid import ACK_TXN

__all__ = ["Replay", "is_ack", "sequence"]

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

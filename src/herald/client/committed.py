"""Read a journal read-committed, outside Spark: the audit's and the tests' reader.

`read_committed` drives Gazette's Sequencer over a `RetryReader`: frames are
decoded by the journal's framing, queued read-uncommitted, and committed ones
dequeued; a committed span that fell out of the ring is replayed by re-reading
its byte range ([I-SEQ-1]). ACK messages are yielded too (the Sequencer delivers
them last in each sequence) so callers can tell when a transaction committed;
`is_ack` tells them apart.

    with BrokerClient(url) as client:
        for env in read_committed(client, "deduped/part-000"):
            if not is_ack(env):
                handle(env.value)

Blocks on I/O; without ``block`` it stops at the write head read at open.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from herald.client.broker import BrokerClient
from herald.client.retry import RetryReader
from herald.message import Envelope, Framing, FramingError, NDJSONFraming, Sequencer, framing_for_labels
from herald.message.decode_errors import DecodeErrors
from herald.message.sequencing import is_ack, sequence

__all__ = ["is_ack", "read_committed", "read_uncommitted"]

log = logging.getLogger(__name__)


def read_uncommitted(client: BrokerClient, journal: str, framing: Framing, begin: int = 0,
                     end: int = 0, block: bool = False,
                     errors: DecodeErrors | None = None) -> Iterator[Envelope]:
    """Every framed message of ``journal`` from ``begin`` (to ``end``, 0 = head).
    Undecodable bytes raise `MessageDecodeError`, or are skipped and counted in
    ``errors`` when its policy is SKIP."""
    errors = errors or DecodeErrors(journal)
    decoder = framing.decoder()
    reader = RetryReader(client, journal, begin, block=block, end_offset=end)
    with reader:
        for offset, chunk in reader:
            for frame in decoder.feed(chunk, offset):
                if isinstance(frame, FramingError):
                    errors.handle(frame)
                    log.warning("journal=%s offset=%d skipped an undecodable message (%d so far): %s",
                                journal, frame.offset, errors.skipped, frame)
                    continue
                yield Envelope(journal, frame.begin, frame.end, frame.uuid, frame.value)


def read_committed(client: BrokerClient, journal: str, framing: Framing | None = None,
                   block: bool = False, errors: DecodeErrors | None = None) -> Iterator[Envelope]:
    """Committed messages (and ACKs) of ``journal``, each exactly once ([I-SEQ-1])."""
    framing = framing or _framing_of(client, journal)
    errors = errors or DecodeErrors(journal)

    def replay(name: str, begin: int, end: int) -> Iterator[Envelope]:
        return read_uncommitted(client, name, framing, begin, end, errors=errors)

    yield from sequence(read_uncommitted(client, journal, framing, block=block, errors=errors),
                        Sequencer(), replay)


def _framing_of(client: BrokerClient, journal: str) -> Framing:
    infos = client.list(f"name={journal}")
    return framing_for_labels(infos[0].spec.labels) if infos else NDJSONFraming()

"""Herald's pure message layer (no I/O, no clock reads: time is an argument).

It owns Gazette's message UUIDs (ProducerID, Clock, Flags), framings by
content type (NDJSON, CSV, fixed), the Sequencer that turns read-uncommitted
envelopes into read-committed ones exactly once ([I-SEQ-1]), the pure core of
the Publisher (stamping, ACK intents) and journal mappings.

    >>> from herald.message import *
    >>> core = PublisherCore(ProducerID.new(b"\\x02" * 6), Clock.from_unix_ns(1_700_000_000 * 10**9))
    >>> ndjson = framing_for("application/x-ndjson")
    >>> line = core.stamp_uncommitted("events/part-000", ndjson, b'{"n":1}')
    >>> [ack] = core.build_ack_intents()
    >>> seq, out, offset = Sequencer(), [], 0
    >>> for data in (line, ack.data):
    ...     for f in ndjson.decoder().feed(data, offset):
    ...         seq.queue_uncommitted(Envelope("events/part-000", f.begin, f.end, f.uuid, f.value))
    ...         while seq.step():
    ...             out.append(seq.dequeued.value)
    ...     offset += len(data)
    <QueueOutcome.CONTINUE_BEGIN_SPAN: 4>
    <QueueOutcome.ACK_COMMIT_RING: 8>
    >>> out[0][-6:], get_flags(uuid_from_str(out[1][9:45])) == Flags.ACK_TXN
    (b'"n":1}', True)
"""

from herald.message.checkpoint import Checkpoint, ProducerState
from herald.message.framing import (
    CSVFraming,
    Decoder,
    FixedFraming,
    Frame,
    Framing,
    FramingError,
    NDJSONFraming,
    framing_for,
    framing_for_labels,
)
from herald.message.mapping import (
    MAPPINGS,
    Mapping,
    NoJournalsError,
    fnv1a32,
    mapping_by_name,
    modulo_mapping,
    random_mapping,
    rendezvous_mapping,
)
from herald.message.publisher import AckIntent, PublisherCore
from herald.message.sequencer import Envelope, QueueOutcome, ReplayError, Sequencer
from herald.message.sequencing import Replay, is_ack, sequence
from herald.message.uuid import (
    ACK_TXN,
    CONTINUE_TXN,
    OUTSIDE_TXN,
    ZERO_UUID,
    Clock,
    Flags,
    ProducerID,
    build_uuid,
    clock_to_unix_ns,
    duration_to_clock,
    flags_str,
    get_clock,
    get_flags,
    get_producer,
    parse_uuid,
    unix_ns_to_clock,
    uuid_from_str,
    uuid_str,
    uuid_suffix,
)

__all__ = [
    "ACK_TXN",
    "AckIntent",
    "CONTINUE_TXN",
    "CSVFraming",
    "Checkpoint",
    "Clock",
    "Decoder",
    "Envelope",
    "FixedFraming",
    "Flags",
    "Frame",
    "Framing",
    "FramingError",
    "MAPPINGS",
    "Mapping",
    "NDJSONFraming",
    "NoJournalsError",
    "OUTSIDE_TXN",
    "ProducerID",
    "ProducerState",
    "PublisherCore",
    "QueueOutcome",
    "Replay",
    "ReplayError",
    "Sequencer",
    "ZERO_UUID",
    "build_uuid",
    "clock_to_unix_ns",
    "duration_to_clock",
    "flags_str",
    "fnv1a32",
    "framing_for",
    "framing_for_labels",
    "get_clock",
    "get_flags",
    "get_producer",
    "is_ack",
    "mapping_by_name",
    "modulo_mapping",
    "parse_uuid",
    "random_mapping",
    "rendezvous_mapping",
    "sequence",
    "unix_ns_to_clock",
    "uuid_from_str",
    "uuid_str",
    "uuid_suffix",
]

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

from __future__ import annotations

from typing import TYPE_CHECKING

from herald.lazy import lazy_exports

#: Public name → the module that defines it. Names load on first use (`herald.lazy`):
#: a Spark commit runner needs `AckIntent` and the UUID helpers, not the Sequencer's numpy.
_EXPORTS = {
    "ACK_TXN": "herald.message.uuid",
    "AckIntent": "herald.message.intents",
    "build_uuid": "herald.message.uuid",
    "Checkpoint": "herald.message.checkpoint",
    "Clock": "herald.message.uuid",
    "clock_to_unix_ns": "herald.message.uuid",
    "CONTINUE_TXN": "herald.message.uuid",
    "CSVFraming": "herald.message.framing",
    "Decoder": "herald.message.framing",
    "duration_to_clock": "herald.message.uuid",
    "Envelope": "herald.message.sequencer",
    "FixedFraming": "herald.message.framing",
    "Flags": "herald.message.uuid",
    "flags_str": "herald.message.uuid",
    "fnv1a32": "herald.message.mapping",
    "Frame": "herald.message.framing",
    "Framing": "herald.message.framing",
    "framing_for": "herald.message.framing",
    "framing_for_labels": "herald.message.framing",
    "FramingError": "herald.message.framing",
    "get_clock": "herald.message.uuid",
    "get_flags": "herald.message.uuid",
    "get_producer": "herald.message.uuid",
    "is_ack": "herald.message.sequencing",
    "Mapping": "herald.message.mapping",
    "mapping_by_name": "herald.message.mapping",
    "MAPPINGS": "herald.message.mapping",
    "modulo_mapping": "herald.message.mapping",
    "NDJSONFraming": "herald.message.framing",
    "NoJournalsError": "herald.message.mapping",
    "OUTSIDE_TXN": "herald.message.uuid",
    "parse_uuid": "herald.message.uuid",
    "ProducerID": "herald.message.uuid",
    "ProducerState": "herald.message.checkpoint",
    "PublisherCore": "herald.message.publisher",
    "QueueOutcome": "herald.message.sequencer",
    "random_mapping": "herald.message.mapping",
    "rendezvous_mapping": "herald.message.mapping",
    "Replay": "herald.message.sequencing",
    "ReplayError": "herald.message.sequencer",
    "sequence": "herald.message.sequencing",
    "Sequencer": "herald.message.sequencer",
    "unix_ns_to_clock": "herald.message.uuid",
    "uuid_from_str": "herald.message.uuid",
    "uuid_str": "herald.message.uuid",
    "uuid_suffix": "herald.message.uuid",
    "ZERO_UUID": "herald.message.uuid",
}

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

if TYPE_CHECKING:
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
    from herald.message.intents import AckIntent
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
    from herald.message.publisher import PublisherCore
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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)

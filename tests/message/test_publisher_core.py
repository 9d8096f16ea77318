"""PublisherCore: UUID stamping order and ACK intents (gazette-facts §3)."""

import orjson

from herald.message.framing import CSVFraming, NDJSONFraming
from herald.message.publisher import PublisherCore
from herald.message.uuid import ACK_TXN, CONTINUE_TXN, OUTSIDE_TXN, Clock, ProducerID, parse_uuid, uuid_from_str

PID = ProducerID.new(b"\x10\x20\x30\x40\x50\x60")
NDJSON = NDJSONFraming()


def uuid_of(line: bytes) -> tuple[bytes, int, int]:
    return parse_uuid(uuid_from_str(orjson.loads(line)["UUID"]))


def test_committed_and_uncommitted_stamps_tick_the_clock_with_their_flags():
    clock = Clock(1 << 40)
    core = PublisherCore(PID, clock)
    first = core.stamp_committed("a/j", NDJSON, {"n": 1})
    second = core.stamp_uncommitted("a/j", NDJSON, b'{"n":2}')
    assert uuid_of(first) == (PID, (1 << 40) + 160, OUTSIDE_TXN)
    assert uuid_of(second) == (PID, (1 << 40) + 320, CONTINUE_TXN)
    assert clock.value == (1 << 40) + 320
    assert orjson.loads(second)["n"] == 2


def test_ack_intents_follow_first_publish_order_with_fresh_clocks_and_clear():
    clock = Clock(1 << 40)
    core = PublisherCore(PID, clock)
    csv = CSVFraming()
    core.stamp_uncommitted("b/j", NDJSON, {})
    core.stamp_uncommitted("a/j", csv, ["x"])
    core.stamp_uncommitted("b/j", NDJSON, {})
    core.stamp_committed("c/j", NDJSON, {})  # Committed publishes need no ACK.
    assert core.pending_journals() == ["b/j", "a/j"]

    intents = core.build_ack_intents()
    assert [i.journal for i in intents] == ["b/j", "a/j"]
    assert orjson.loads(intents[0].data).keys() == {"UUID"}
    assert uuid_of(intents[0].data) == (PID, (1 << 40) + 5 * 160, ACK_TXN)
    [frame] = csv.decoder().feed(intents[1].data, 0)
    assert parse_uuid(frame.uuid) == (PID, (1 << 40) + 6 * 160, ACK_TXN)

    assert core.build_ack_intents() == [] and core.pending_journals() == []

"""UUID layout golden tests against Python's uuid module, plus round-trips (§1)."""

import uuid as stdlib_uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herald.message.uuid import (
    ACK_TXN,
    CONTINUE_TXN,
    GREGORIAN_OFFSET_100NS,
    OUTSIDE_TXN,
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
)

producers = st.binary(min_size=6, max_size=6)
clocks = st.integers(min_value=0, max_value=(1 << 64) - 1)
flag_values = st.integers(min_value=0, max_value=0x3FF)

PRODUCER = bytes.fromhex("0102030405f6")


@given(producers, clocks, flag_values)
def test_build_then_parse_returns_the_inputs(producer, clock, flags):
    b = build_uuid(producer, clock, flags)
    assert len(b) == 16
    assert parse_uuid(b) == (producer, clock, flags)
    assert (get_producer(b), get_clock(b), get_flags(b)) == (producer, clock, flags)
    assert uuid_from_str(uuid_str(b)) == b


@given(producers, clocks, flag_values)
def test_stdlib_sees_a_version_1_rfc4122_uuid_with_producer_as_node(producer, clock, flags):
    u = stdlib_uuid.UUID(bytes=build_uuid(producer, clock, flags))
    assert u.version == 1
    assert u.variant == stdlib_uuid.RFC_4122
    assert u.node == int.from_bytes(producer, "big")
    assert u.time == clock >> 4
    # clock_seq = counter (4 bits) << 10 | flags, under the 2 variant bits.
    assert u.clock_seq == ((clock & 0xF) << 10) | flags
    assert str(u) == uuid_str(u.bytes)


def test_uuid1_fields_parse_back_to_gazette_parts():
    u = stdlib_uuid.uuid1(node=0x0102030405F6, clock_seq=(5 << 10) | ACK_TXN)
    producer, clock, flags = parse_uuid(u.bytes)
    assert producer == PRODUCER
    assert clock == (u.time << 4) | 5
    assert flags == ACK_TXN
    assert build_uuid(producer, clock, flags) == u.bytes


def test_known_layout_bytes():
    clock = (0x0123456789ABCDE << 4) | 0x9
    b = build_uuid(PRODUCER, clock, 0x2AB)
    # time_low, time_mid, time_hi|version, variant|counter|flags, node.
    assert b.hex() == "789abcde" "3456" "1012" "a6ab" "0102030405f6"
    assert b[0:4] == bytes.fromhex("789abcde")
    assert b[4:6] == bytes.fromhex("3456")
    assert b[6:8] == bytes.fromhex("1012")
    assert b[8:10] == (0x8000 | (0x9 << 10) | 0x2AB).to_bytes(2, "big")
    assert b[10:] == PRODUCER


@pytest.mark.parametrize("flags", [0x400, 0xFFFF, -1])
def test_build_rejects_flags_outside_10_bits(flags):
    with pytest.raises(ValueError, match="flags"):
        build_uuid(PRODUCER, 160, flags)


def test_build_rejects_bad_producer_and_clock():
    with pytest.raises(ValueError, match="producer"):
        build_uuid(b"\x01" * 5, 160, 0)
    with pytest.raises(ValueError, match="clock"):
        build_uuid(PRODUCER, 1 << 64, 0)


def test_parse_rejects_wrong_length():
    with pytest.raises(ValueError, match="16 bytes"):
        parse_uuid(b"\x00" * 15)


def test_flags_constants_and_names_match_gazette():
    assert (OUTSIDE_TXN, CONTINUE_TXN, ACK_TXN) == (0, 1, 2)
    assert Flags.ACK_TXN == ACK_TXN and Flags.CONTINUE_TXN == CONTINUE_TXN and Flags.OUTSIDE_TXN == 0
    assert [flags_str(f) for f in (0, 1, 2, 0x3FF)] == ["OUTSIDE_TXN", "CONTINUE_TXN", "ACK_TXN", "Flags(3ff)"]


def test_producer_id_new_sets_multicast_bit_and_round_trips_hex():
    p = ProducerID.new(b"\x00\x11\x22\x33\x44\x55\x66")
    assert p == bytes.fromhex("011122334455")
    assert ProducerID.from_hex(p.hex()) == p
    assert isinstance(p, bytes)
    with pytest.raises(ValueError):
        ProducerID.new(b"\x00" * 5)
    with pytest.raises(ValueError):
        ProducerID.from_hex("zz")


@given(st.binary(min_size=6, max_size=6))
def test_producer_id_new_is_always_multicast(raw):
    assert ProducerID.new(raw)[0] & 1 == 1


def test_clock_update_only_moves_forward_and_zeroes_counter():
    c = Clock.from_unix_ns(1_000_000_000_000)
    start = c.value
    assert start & 0xF == 0
    assert start == (1_000_000_000_000 // 100 + GREGORIAN_OFFSET_100NS) << 4
    c.value += 3  # Counter bits set.
    c.update(999_000_000_000)  # Earlier: ignored.
    assert c.value == start + 3
    c.update(1_000_000_000_100)  # Later by one 100 ns tick: counter zeroed.
    assert c.value == start + 16


def test_clock_tick_adds_one_microsecond():
    c = Clock.from_unix_ns(5_000)
    before = c.value
    assert c.tick() == before + 160
    assert c.value == before + 160
    assert clock_to_unix_ns(c.value) == 6_000


@given(st.integers(min_value=0, max_value=4 * 10**18))
def test_unix_ns_clock_round_trip_truncates_to_100ns(ns):
    assert clock_to_unix_ns(unix_ns_to_clock(ns)) == ns - ns % 100


def test_duration_to_clock_uses_100ns_units_shifted_by_4():
    assert duration_to_clock(24 * 3600 * 10**9) == (24 * 3600 * 10**7) << 4


@pytest.mark.parametrize(
    "text",
    [
        "01234567-89ab-1def-8123-0102030405f6",
        "01234567-89AB-1DEF-8123-0102030405F6",
        "0123456789ab1def81230102030405f6",
        "{01234567-89ab-1def-8123-0102030405f6}",
        "urn:uuid:01234567-89ab-1def-8123-0102030405f6",
    ],
)
def test_uuid_from_str_accepts_gazette_forms(text):
    assert uuid_from_str(text) == bytes.fromhex("0123456789ab1def81230102030405f6")


@pytest.mark.parametrize(
    "text",
    ["", "01234567-89ab-1def-8123-0102030405f", "01234567_89ab-1def-8123-0102030405f6",
     "0123456789ab1def81230102030405fg", "01 23456789ab1def81230102030405f6"],
)
def test_uuid_from_str_rejects_malformed_text(text):
    with pytest.raises(ValueError, match="uuid"):
        uuid_from_str(text)

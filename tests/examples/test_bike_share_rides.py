"""Parsing Citi Bike records: good rows, and bad rows named by column."""

from __future__ import annotations

from datetime import datetime

import pytest

from herald.examples.bike_share.rides import BadRowError, parse_record

UUID = "ba5a2e1b-e855-11f1-8001-f78bbc5939b4"
# A row as Citi Bike's September 2019 file has it, with attach-uuids' UUID in front.
GOOD = (f'{UUID},1337,"2019-09-01 00:00:01.8430","2019-09-01 00:22:19.4140",3400,"Vernon Blvd & 50 Ave",'
        '40.74232744,-73.95411749,3269,"Brooklyn Bridge Park - Pier 2",40.6990931,-73.99980607,28587,'
        '"Subscriber",1986,1\n').encode()


def with_field(index: int, value: str) -> bytes:
    fields = GOOD.decode().rstrip("\n").split(",")
    fields[index] = value
    return ",".join(fields).encode()


def test_a_citi_bike_row_parses():
    ride = parse_record(GOOD)
    assert (ride.uuid, ride.bike_id, ride.trip_duration_s) == (UUID, 28587, 1337)
    assert ride.start_time == datetime(2019, 9, 1, 0, 0, 1, 843000)
    assert (ride.start_station_id, ride.start_station_name) == (3400, "Vernon Blvd & 50 Ave")
    assert (ride.end_station_id, ride.end_station_name) == (3269, "Brooklyn Bridge Park - Pier 2")


@pytest.mark.parametrize(("record", "field"), [
    (with_field(12, "NULL"), "bikeid"),
    (with_field(1, "12.5"), "tripduration"),
    (with_field(2, '"yesterday"'), "starttime"),
    (with_field(3, '"2019-08-31 00:00:00.0000"'), "stoptime"),  # before its start
    (with_field(4, '"NULL"'), "start station id"),
    (with_field(9, '""'), "end station name"),
    (with_field(0, "not-a-uuid"), "UUID"),
    (GOOD.replace(b',"Subscriber"', b""), "record"),              # a column missing
    (b"\xff\xfe" + GOOD, "record"),                               # not UTF-8
    (b"", "record"),
])
def test_a_bad_row_names_its_column(record, field):
    with pytest.raises(BadRowError) as err:
        parse_record(record)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")

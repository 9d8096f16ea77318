"""Citi Bike trip records: the September 2019 CSV schema, and parsing one row into a `Ride`.

A record in a rides journal is the Citi Bike CSV row with the message UUID put in
front by ``herald attach-uuids --format csv`` (16 columns). Parsing is pure and
strict: a row that does not fit raises `BadRowError` naming the column, so the job
can report it with its journal offset instead of miscounting it.

    >>> ride = parse_ride(next(csv.reader([line])))      # doctest: +SKIP
    >>> ride.bike_id, ride.start_station_name
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import datetime

__all__ = ["BadRowError", "COLUMNS", "HEADER", "Ride", "parse_record", "parse_ride"]

#: The columns of Citi Bike's trip data from June 2018 to January 2021 (201909 included).
COLUMNS = (
    "tripduration", "starttime", "stoptime", "start station id", "start station name",
    "start station latitude", "start station longitude", "end station id", "end station name",
    "end station latitude", "end station longitude", "bikeid", "usertype", "birth year", "gender",
)
#: The header line as Citi Bike writes it: every name quoted.
HEADER = ",".join(f'"{c}"' for c in COLUMNS)
TIME_FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")


class BadRowError(ValueError):
    """A rides record that does not fit the schema; ``field`` names the column."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Ride:
    """One trip of one bike: what the cycle finder and the ride history keep."""

    uuid: str
    bike_id: int
    trip_duration_s: int
    start_time: datetime
    end_time: datetime
    start_station_id: int
    start_station_name: str
    end_station_id: int
    end_station_name: str


def _int(fields: dict[str, str], name: str) -> int:
    text = fields[name].strip()
    try:
        return int(text)
    except ValueError:
        raise BadRowError(name, f"want an integer, got {text[:40]!r}") from None


def _time(fields: dict[str, str], name: str) -> datetime:
    text = fields[name].strip()
    for fmt in TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise BadRowError(name, f"want a time like 2019-09-01 00:00:01.8430, got {text[:40]!r}")


def _name(fields: dict[str, str], name: str) -> str:
    text = fields[name].strip()
    if not text:
        raise BadRowError(name, "empty")
    return text


def parse_ride(row: list[str]) -> Ride:
    """A `Ride` from a record's fields: the UUID, then Citi Bike's 15 columns.
    Raises `BadRowError` naming the first column that does not parse."""
    if len(row) != len(COLUMNS) + 1:
        raise BadRowError("record", f"has {len(row)} fields, want {len(COLUMNS) + 1} (UUID + {len(COLUMNS)})")
    fields = dict(zip(COLUMNS, row[1:]))
    uuid = row[0].strip()
    if len(uuid) != 36:
        raise BadRowError("UUID", f"want a 36-character UUID, got {uuid[:40]!r}")
    ride = Ride(uuid=uuid, bike_id=_int(fields, "bikeid"), trip_duration_s=_int(fields, "tripduration"),
                start_time=_time(fields, "starttime"), end_time=_time(fields, "stoptime"),
                start_station_id=_int(fields, "start station id"),
                start_station_name=_name(fields, "start station name"),
                end_station_id=_int(fields, "end station id"), end_station_name=_name(fields, "end station name"))
    if ride.end_time < ride.start_time:
        raise BadRowError("stoptime", f"{ride.end_time} is before starttime {ride.start_time}")
    return ride


def parse_record(record: bytes) -> Ride:
    """A `Ride` from one journal record (bytes of one CSV line)."""
    try:
        text = record.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRowError("record", f"not UTF-8 (byte {exc.start})") from None
    try:
        rows = list(csv.reader([text.rstrip("\r\n")]))
    except csv.Error as exc:
        raise BadRowError("record", f"bad CSV: {exc}") from None
    return parse_ride(rows[0] if rows else [])

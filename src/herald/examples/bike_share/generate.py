"""Synthetic Citi Bike trip data in the exact September 2019 CSV format, with cycles planted.

There is no network here to fetch ``201909-citibike-tripdata.csv``, so this writes
a file of the same shape: the quoted header, then one row per trip, sorted by
start time, strings quoted and numbers bare as Citi Bike writes them. Every bike
rides in *segments*: a short random walk (at most `BACKGROUND_MAX` rides, so it
can hold no cycle of length ≥ 10), or a planted cycle of 10–14 rides through
distinct stations, back to where it started. Between segments the bike is
*relocated* (its next ride starts at another station), so no cycle spans two
segments. Hence the cycles of length ≥ 10 in the file are exactly the planted
ones, which `generate` returns for tests and the demo to check against.

Station names never contain a comma, so the seed's ``awk -F ,`` keying works.

    planted = generate(Path("rides.csv"), GenerateSettings(bikes=40, rides=2000, cycles=5, seed=7))
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from herald.examples.bike_share.rides import COLUMNS
from herald.protocol.errors import ValidationError

__all__ = ["BACKGROUND_MAX", "GenerateSettings", "PlantedCycle", "Station", "generate", "write_rides"]

BACKGROUND_MAX = 8
CYCLE_LENGTHS = (10, 14)
START = datetime(2019, 9, 1)
AVENUES = ("1 Ave", "2 Ave", "3 Ave", "Lexington Ave", "Park Ave", "Madison Ave", "5 Ave", "6 Ave", "7 Ave",
           "8 Ave", "9 Ave", "10 Ave", "11 Ave", "Broadway", "Amsterdam Ave", "Columbus Ave", "West End Ave")
STREETS = tuple(range(1, 90, 3))


@dataclass(frozen=True, slots=True)
class Station:
    id: int
    name: str
    latitude: float
    longitude: float


#: One trip: (bike id, from, to, start, end).
TripRow = tuple[int, Station, Station, datetime, datetime]


@dataclass(frozen=True, slots=True)
class PlantedCycle:
    """A cycle the generator planted: the bike and T, then each station reached."""

    bike_id: int
    station_ids: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"bike_id": self.bike_id, "length": len(self.station_ids) - 1, "station_ids": list(self.station_ids)}


@dataclass(frozen=True, slots=True)
class GenerateSettings:
    stations: int = 60
    bikes: int = 40
    rides: int = 2000
    cycles: int = 5
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.stations < CYCLE_LENGTHS[1] + 2:
            raise ValidationError("stations", f"want at least {CYCLE_LENGTHS[1] + 2} ({self.stations})")
        if self.bikes < 1:
            raise ValidationError("bikes", f"want at least 1 ({self.bikes})")
        if self.rides < self.cycles * CYCLE_LENGTHS[1]:
            raise ValidationError("rides", f"too few for {self.cycles} planted cycles ({self.rides})")


def make_stations(n: int, rnd: random.Random) -> list[Station]:
    names = sorted({f"{'W' if s % 2 else 'E'} {s} St & {a}" for a in AVENUES for s in STREETS})
    rnd.shuffle(names)
    return [Station(3000 + i * 7 + rnd.randrange(7), names[i], round(40.70 + rnd.random() * 0.1, 8),
                    round(-74.02 + rnd.random() * 0.08, 8)) for i in range(n)]


@dataclass
class _Bike:
    id: int
    at: Station
    clock: datetime
    rides: list[TripRow] = field(default_factory=list)


def _ride(bike: _Bike, to: Station, rnd: random.Random) -> None:
    start = bike.clock + timedelta(minutes=rnd.uniform(10, 360), microseconds=rnd.randrange(10**6) // 100 * 100)
    duration = timedelta(seconds=rnd.randint(240, 2700), microseconds=rnd.randrange(10**6) // 100 * 100)
    bike.rides.append((bike.id, bike.at, to, start, start + duration))
    bike.at, bike.clock = to, start + duration


def _relocate(bike: _Bike, stations: list[Station], rnd: random.Random, to: Station | None = None) -> None:
    bike.at = to or rnd.choice([s for s in stations if s.id != bike.at.id])
    bike.clock += timedelta(hours=rnd.uniform(1, 12))


def _background(bike: _Bike, stations: list[Station], rnd: random.Random, n: int) -> None:
    for _ in range(n):
        _ride(bike, rnd.choice([s for s in stations if s.id != bike.at.id]), rnd)


def _planted(bike: _Bike, stations: list[Station], rnd: random.Random) -> PlantedCycle:
    length = rnd.randint(*CYCLE_LENGTHS)
    # Neither where the bike stands nor where its last ride ended: a cycle leaving the
    # last ride's end would join the segment before it, and no relocation would show.
    last_end = bike.rides[-1][2].id if bike.rides else None
    home = rnd.choice([s for s in stations if s.id not in (bike.at.id, last_end)])
    _relocate(bike, stations, rnd, home)
    for stop in rnd.sample([s for s in stations if s.id != home.id], length - 1) + [home]:
        _ride(bike, stop, rnd)
    return PlantedCycle(bike.id, (home.id, *(r[2].id for r in bike.rides[-length:])))


def simulate(s: GenerateSettings) -> tuple[list[TripRow], list[PlantedCycle]]:
    """Every ride ``(bike id, from, to, start, end)`` in start-time order, and the planted cycles."""
    rnd = random.Random(s.seed)
    stations = make_stations(s.stations, rnd)
    ids = rnd.sample(range(14529, 42000), s.bikes)
    bikes = [_Bike(i, rnd.choice(stations), START + timedelta(minutes=rnd.uniform(0, 600))) for i in ids]
    segments: list[int] = []  # 0: a planted cycle; n > 0: n background rides (about s.rides in all)
    left = s.rides - s.cycles * CYCLE_LENGTHS[1]
    while left > 0:
        n = min(rnd.randint(1, BACKGROUND_MAX), left)
        segments.append(n)
        left -= n
    segments += [0] * s.cycles
    rnd.shuffle(segments)
    planted = []
    for n in segments:
        bike = rnd.choice(bikes)
        if n == 0:
            planted.append(_planted(bike, stations, rnd))
        else:
            _background(bike, stations, rnd, n)
        _relocate(bike, stations, rnd)  # Segments never join: no cycle spans two.
    rides = sorted((r for b in bikes for r in b.rides), key=lambda r: (r[3], r[0]))
    return rides, planted


def _time(t: datetime) -> str:
    return f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond // 100:04d}"


def write_rides(out: TextIO, rides: list[TripRow], rnd: random.Random) -> None:
    """Citi Bike's CSV: the header and strings quoted, numbers bare."""
    out.write(",".join(f'"{c}"' for c in COLUMNS) + "\n")
    writer = csv.writer(out, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
    for bike_id, a, b, start, end in rides:
        writer.writerow([int((end - start).total_seconds()), _time(start), _time(end), a.id, a.name, a.latitude,
                         a.longitude, b.id, b.name, b.latitude, b.longitude, bike_id,
                         rnd.choice(("Subscriber", "Subscriber", "Subscriber", "Customer")),
                         rnd.randint(1950, 2002), rnd.choice((0, 1, 1, 2))])


def generate(path: Path, s: GenerateSettings) -> list[PlantedCycle]:
    """Write ``path`` (Citi Bike's CSV); returns the planted cycles."""
    rides, planted = simulate(s)
    with open(path, "w", newline="") as out:
        write_rides(out, rides, random.Random(s.seed))
    return planted

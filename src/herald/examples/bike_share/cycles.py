"""Finding long cycles in one bike's rides: Gazette's bike-share objective, as a pure fold.

A *cycle* is a run of consecutive rides of one bike that leaves a station T and
returns to T without passing through T in between (other stations may repeat);
its *length* is its number of rides. Only cycles of length ≥ `MIN_LENGTH` are
reported. A ride that starts somewhere other than where the bike's previous ride
ended is a *relocation* (the operator moved the bike by truck): it breaks the
path, and no cycle spans it.

The state per bike is its *path*: the rides since the last relocation, at most
`WINDOW` of them (a cycle longer than the window is not found; Gazette's example
windows its SQL the same way). When a ride ends at T, the only candidate cycle
is the one that starts with the path's latest departure from T — any earlier
departure would pass through T again — so each ride costs one backward scan.

    >>> path, cycle = extend([], leg)                      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from herald.examples.bike_share.rides import Ride

__all__ = ["MIN_LENGTH", "WINDOW", "Cycle", "Leg", "extend", "find_cycles", "leg_of"]

MIN_LENGTH = 10
WINDOW = 256

#: One ride as the path keeps it (JSON-friendly, for Spark's state):
#: (start station id, start name, start time, end station id, end name, end time).
Leg = tuple[int, str, str, int, str, str]


def leg_of(ride: Ride) -> Leg:
    return (ride.start_station_id, ride.start_station_name, ride.start_time.isoformat(),
            ride.end_station_id, ride.end_station_name, ride.end_time.isoformat())


@dataclass(frozen=True, slots=True)
class Cycle:
    """A found cycle: the departure from T, then each arrival (the last one at T)."""

    bike_id: int
    legs: tuple[Leg, ...]

    @property
    def length(self) -> int:
        return len(self.legs)

    @property
    def station_ids(self) -> tuple[int, ...]:
        """T, every station reached, ending with T again (length + 1 entries)."""
        return (self.legs[0][0], *(leg[3] for leg in self.legs))

    def to_dict(self) -> dict[str, Any]:
        """Gazette's Cycle message shape: ``BikeID`` and ``Steps`` of time and station."""
        first = self.legs[0]
        steps = [{"Time": first[2], "Station": first[1], "StationID": first[0]}]
        steps += [{"Time": leg[5], "Station": leg[4], "StationID": leg[3]} for leg in self.legs]
        return {"BikeID": self.bike_id, "Length": self.length, "Steps": steps}


def extend(path: Sequence[Leg], leg: Leg, bike_id: int = 0, min_length: int = MIN_LENGTH,
           window: int = WINDOW) -> tuple[list[Leg], Cycle | None]:
    """The bike's path after ``leg``, and the cycle ``leg`` completes (or None)."""
    new = list(path) if path and path[-1][3] == leg[0] else []  # a relocation resets the path
    new.append(leg)
    del new[:-window]
    home = leg[3]
    for i in range(len(new) - 1, -1, -1):
        if new[i][0] == home:
            length = len(new) - i
            return new, (Cycle(bike_id, tuple(new[i:])) if length >= min_length else None)
    return new, None


def find_cycles(bike_id: int, legs: Iterable[Leg], path: Sequence[Leg] = (), min_length: int = MIN_LENGTH,
                window: int = WINDOW) -> tuple[list[Leg], list[Cycle]]:
    """Fold ``legs`` (in ride order) into ``path``: the new path and the cycles found."""
    current, found = list(path), []
    for leg in legs:
        current, cycle = extend(current, leg, bike_id, min_length, window)
        if cycle is not None:
            found.append(cycle)
    return current, found

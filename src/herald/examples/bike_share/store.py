"""Each bike's recent rides in PostgreSQL, exactly once: Gazette's ``StoreSQL`` fence, for Spark.

A micro-batch is one SQL transaction. It writes the batch's rides (and its bad
rows, with their journal offsets), trims each touched bike to its `history`
most recent rides, and moves the checkpoint row ``(query_id, batch_id, fence)``
to this batch — all or nothing. Spark replays the last batch after a crash
(spark-facts "Failure and restart"); a batch at or below the row's ``batch_id``
is therefore a replay and changes nothing.

**The fence.** A driver that starts bumps the row's ``fence`` (`RideStore.open`)
and remembers the value; every batch transaction first locks the row and
checks it. A *zombie* — an older driver still running on the same checkpoint,
e.g. one that was paused — finds a newer fence and is refused with
`FencedError`, writing nothing. Commit order, inside one transaction::

    SELECT batch_id, fence ... FOR UPDATE     # refuse if fence moved; skip if replayed
    INSERT rides / bad_rides; DELETE beyond the window
    UPDATE herald_checkpoints SET batch_id = <batch>

Rides carry their message UUID as the primary key, with a plain ``INSERT``: if
the checkpoint ever let a batch through twice, the transaction would fail
loudly rather than silently double a ride.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from herald.examples.bike_share.rides import Ride
from herald.protocol.errors import HeraldError, Status

__all__ = ["BadRow", "FencedError", "RideStore", "SCHEMA", "StoredRide"]

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS rides (
    uuid uuid PRIMARY KEY,
    bike_id integer NOT NULL,
    start_time timestamp NOT NULL,
    end_time timestamp NOT NULL,
    start_station_id integer NOT NULL,
    start_station_name text NOT NULL,
    end_station_id integer NOT NULL,
    end_station_name text NOT NULL,
    trip_duration_s integer NOT NULL,
    journal text NOT NULL,
    "offset" bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS rides_by_bike ON rides (bike_id, start_time DESC);
CREATE TABLE IF NOT EXISTS bad_rides (
    journal text NOT NULL,
    "offset" bigint NOT NULL,
    field text NOT NULL,
    reason text NOT NULL,
    PRIMARY KEY (journal, "offset")
);
CREATE TABLE IF NOT EXISTS herald_checkpoints (
    query_id text PRIMARY KEY,
    batch_id bigint NOT NULL,
    fence bigint NOT NULL
);
"""


class FencedError(HeraldError):
    """A newer driver took over this query's store: this one must stop."""

    def __init__(self, query_id: str, fence: int, current: int) -> None:
        super().__init__(Status.REGISTER_MISMATCH, f"query {query_id}: this driver's fence {fence} was "
                         f"bumped to {current} by a newer driver; refusing to write", "fence")


@dataclass(frozen=True, slots=True)
class StoredRide:
    """A ride with where it was read: its journal and offset."""

    ride: Ride
    journal: str
    offset: int


@dataclass(frozen=True, slots=True)
class BadRow:
    """A record that does not parse, reported with its journal offset."""

    journal: str
    offset: int
    field: str
    reason: str


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    batch_id: int
    replayed: bool
    rides: int
    bad_rows: int


class RideStore:
    """The ride history of one streaming query (``query_id``: Spark's query id,
    stable across restarts from the same checkpoint). Blocks on the database."""

    def __init__(self, dsn: str, query_id: str, history: int = 20) -> None:
        self.dsn = dsn
        self.query_id = query_id
        self.history = history
        self.fence = 0

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.dsn, autocommit=False)

    def create_schema(self) -> None:
        with self.connect() as conn:
            conn.execute(SCHEMA)

    def open(self) -> int:
        """Bump the fence (a new driver takes over); returns the last batch written, -1 if none."""
        self.create_schema()
        with self.connect() as conn:
            row = conn.execute(
                "INSERT INTO herald_checkpoints (query_id, batch_id, fence) VALUES (%s, -1, 1) "
                "ON CONFLICT (query_id) DO UPDATE SET fence = herald_checkpoints.fence + 1 "
                "RETURNING batch_id, fence", (self.query_id,)).fetchone()
        assert row is not None
        self.fence = int(row[1])
        log.info("ride store open query=%s fence=%d last_batch=%d", self.query_id, self.fence, row[0])
        return int(row[0])

    def write_batch(self, batch_id: int, rides: Sequence[StoredRide], bad: Sequence[BadRow]) -> BatchOutcome:
        """Write one micro-batch in one transaction (module docstring). Raises
        `FencedError` (having written nothing) if a newer driver took over."""
        with self.connect() as conn, conn.transaction():
            row = conn.execute("SELECT batch_id, fence FROM herald_checkpoints WHERE query_id = %s FOR UPDATE",
                               (self.query_id,)).fetchone()
            current_batch, fence = (int(row[0]), int(row[1])) if row else (-1, 0)
            if fence != self.fence:
                raise FencedError(self.query_id, self.fence, fence)
            if batch_id <= current_batch:
                return BatchOutcome(batch_id, True, 0, 0)
            self._insert(conn, rides, bad)
            conn.execute("UPDATE herald_checkpoints SET batch_id = %s WHERE query_id = %s",
                         (batch_id, self.query_id))
        return BatchOutcome(batch_id, False, len(rides), len(bad))

    def _insert(self, conn: psycopg.Connection, rides: Sequence[StoredRide], bad: Sequence[BadRow]) -> None:
        with conn.cursor() as cur:
            cur.executemany(
                'INSERT INTO rides (uuid, bike_id, start_time, end_time, start_station_id, start_station_name, '
                'end_station_id, end_station_name, trip_duration_s, journal, "offset") '
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(r.ride.uuid, r.ride.bike_id, r.ride.start_time, r.ride.end_time, r.ride.start_station_id,
                  r.ride.start_station_name, r.ride.end_station_id, r.ride.end_station_name,
                  r.ride.trip_duration_s, r.journal, r.offset) for r in rides])
            cur.executemany('INSERT INTO bad_rides (journal, "offset", field, reason) VALUES (%s, %s, %s, %s)',
                            [(b.journal, b.offset, b.field, b.reason) for b in bad])
        bikes = sorted({r.ride.bike_id for r in rides})
        if bikes:  # Keep each bike's `history` most recent rides.
            conn.execute(
                "DELETE FROM rides WHERE uuid IN (SELECT uuid FROM (SELECT uuid, row_number() OVER "
                "(PARTITION BY bike_id ORDER BY start_time DESC, uuid DESC) AS n FROM rides "
                "WHERE bike_id = ANY(%s)) AS ranked WHERE n > %s)", (bikes, self.history))

    def checkpoint(self) -> tuple[int, int] | None:
        """``(batch_id, fence)`` of this query's checkpoint row, or None."""
        with self.connect() as conn:
            row = conn.execute("SELECT batch_id, fence FROM herald_checkpoints WHERE query_id = %s",
                               (self.query_id,)).fetchone()
        return (int(row[0]), int(row[1])) if row else None


def recent_rides(conn: psycopg.Connection, bike_id: int, limit: int) -> list[dict]:
    """A bike's most recent rides, newest last (Gazette's history API order)."""
    rows = conn.execute(
        "SELECT uuid, start_time, end_time, start_station_name, end_station_name FROM "
        "(SELECT * FROM rides WHERE bike_id = %s ORDER BY start_time DESC LIMIT %s) AS r ORDER BY start_time",
        (bike_id, limit)).fetchall()
    return [{"UUID": str(u), "StartTime": s.isoformat(), "EndTime": e.isoformat(), "StartStation": a,
             "EndStation": b} for u, s, e, a, b in rows]

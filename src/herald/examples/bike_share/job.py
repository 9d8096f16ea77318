"""The bike-share Spark job: two streaming queries over the rides journals.

Both read the rides journals read-committed (CSV records, UUID first) and parse
each record with `parse_record` in ``mapInPandas``; then

* **cycles**: rows grouped by bike ID into ``applyInPandasWithState`` — the
  state is the bike's path (`herald.examples.bike_share.cycles`), kept in
  RocksDB with Spark's checkpoint — and each cycle of length ≥ 10 goes to the
  cycles journals through the exactly-once ``herald`` sink, mapped by bike ID;
* **rides**: ``foreachBatch`` writes the batch to PostgreSQL in one transaction
  with its checkpoint row and fence (`herald.examples.bike_share.store`).

A bike's rides are all in one journal (the loader maps them ``modulo`` on bike
ID), so their journal order is their ride order; within a batch they are sorted
by start time, then offset.

**Bad records** (``on_bad_row``): ``skip`` (default) stores each record that
does not parse in ``bad_rides`` with its journal, offset, column and reason, in
the batch's transaction, and logs it; a record the CSV framing itself cannot
decode (wrong field count, not a UUID) is skipped by the source, which logs its
journal and offset. ``stop`` fails the job at the first bad record, naming its
journal and offset; a restart stops there again until the record is dealt with.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from herald.examples.bike_share.cycles import MIN_LENGTH, find_cycles
from herald.examples.bike_share.rides import BadRowError, Ride, parse_record
from herald.examples.bike_share.store import BadRow, RideStore, StoredRide
from herald.pipelines.streaming import validate_trigger
from herald.protocol.errors import HeraldError, Status, ValidationError

__all__ = ["BikeShareSettings", "BadRecordError", "run_bike_share"]

log = logging.getLogger(__name__)

RIDES_SELECTOR = "app.herald.dev/message-type=bike_share.Ride"
CYCLES_SELECTOR = "app.herald.dev/message-type=bike_share.Cycle"
PARSED_SCHEMA = ("journal string, offset long, uuid string, bike_id long, trip_duration_s long, "
                 "start_time string, end_time string, start_station_id long, start_station_name string, "
                 "end_station_id long, end_station_name string, bad_field string, bad_reason string")
RIDE_COLUMNS = ("uuid", "bike_id", "trip_duration_s", "start_time", "end_time", "start_station_id",
                "start_station_name", "end_station_id", "end_station_name")
FENCE_DEADLINE_S = 120.0
POLL_S = 1.0


@dataclass(frozen=True, slots=True)
class BikeShareSettings:
    broker: str
    checkpoint: str
    dsn: str
    rides: str = RIDES_SELECTOR
    cycles: str = CYCLES_SELECTOR
    history: int = 20
    min_length: int = MIN_LENGTH
    trigger: str = "available-now"
    max_bytes_per_trigger: int = 0
    on_bad_row: str = "skip"

    def __post_init__(self) -> None:
        if self.on_bad_row not in ("skip", "stop"):
            raise ValidationError("on_bad_row", f"want skip or stop ({self.on_bad_row!r})")
        if self.history < 1:
            raise ValidationError("history", f"want at least 1 ({self.history})")
        if self.min_length < 1:
            raise ValidationError("min_length", f"want at least 1 ({self.min_length})")
        validate_trigger(self.trigger)


class BadRecordError(HeraldError):
    """A rides record that does not parse, with ``on_bad_row=stop``."""

    def __init__(self, bad: BadRow) -> None:
        super().__init__(Status.MESSAGE_DECODE_ERROR, f"offset {bad.offset}: journal {bad.journal}: "
                         f"{bad.field}: {bad.reason} (run with --on-bad-row skip to record and skip it)", bad.field)


# -- executors ------------------------------------------------------------------------------


def parse_frames(frames: Iterator[Any]) -> Iterator[Any]:
    """Executor (``mapInPandas``): source rows → parsed rides, or the reason they are bad."""
    import pandas as pd

    for frame in frames:
        out = []
        for journal, begin, value in zip(frame["journal"], frame["begin"], frame["value"]):
            try:
                ride = parse_record(bytes(value))
            except BadRowError as err:
                out.append({"journal": journal, "offset": int(begin), "bad_field": err.field,
                            "bad_reason": err.reason})
                continue
            out.append({"journal": journal, "offset": int(begin), **_ride_columns(ride),
                        "bad_field": None, "bad_reason": None})
        yield pd.DataFrame(out, columns=[c.split()[0] for c in PARSED_SCHEMA.split(", ")])


def _ride_columns(ride: Ride) -> dict:
    return {"uuid": ride.uuid, "bike_id": ride.bike_id, "trip_duration_s": ride.trip_duration_s,
            "start_time": ride.start_time.isoformat(), "end_time": ride.end_time.isoformat(),
            "start_station_id": ride.start_station_id, "start_station_name": ride.start_station_name,
            "end_station_id": ride.end_station_id, "end_station_name": ride.end_station_name}


def cycles_of_bike(min_length: int) -> Callable[..., Iterator[Any]]:
    """Executor (``applyInPandasWithState``): one bike's new rides → its cycles."""
    def apply(key: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd

        bike_id = int(key[0])
        rides = pd.concat(list(frames)).sort_values(["start_time", "journal", "offset"])
        path = json.loads(state.get[0]) if state.exists else []
        legs = list(zip(rides["start_station_id"].astype(int), rides["start_station_name"], rides["start_time"],
                        rides["end_station_id"].astype(int), rides["end_station_name"], rides["end_time"]))
        path, cycles = find_cycles(bike_id, [tuple(_plain(v) for v in leg) for leg in legs],
                                   [tuple(p) for p in path], min_length)
        state.update((json.dumps(path),))
        yield pd.DataFrame({"key": [str(bike_id)] * len(cycles),
                            "value": [json.dumps(c.to_dict(), separators=(",", ":")) for c in cycles]})
    return apply


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


# -- driver ---------------------------------------------------------------------------------


class RidesWriter:
    """Driver (``foreachBatch``): one micro-batch → one PostgreSQL transaction."""

    def __init__(self, s: BikeShareSettings, report: Callable[[str], None]) -> None:
        self.settings = s
        self.report = report
        self.store: RideStore | None = None
        self.opened = threading.Event()
        self.failure: BaseException | None = None

    def open(self, query_id: str) -> None:
        self.store = RideStore(self.settings.dsn, query_id, self.settings.history)
        last = self.store.open()
        self.report(f"rides store: query {query_id} fence {self.store.fence} last batch {last}")
        self.opened.set()

    def __call__(self, frame: Any, batch_id: int) -> None:
        try:
            self._write(frame, batch_id)
        except BaseException as err:
            self.failure = err
            raise

    def _write(self, frame: Any, batch_id: int) -> None:
        if not self.opened.wait(FENCE_DEADLINE_S):
            raise HeraldError(Status.INTERNAL, "the ride store was not opened in time", "dsn")
        assert self.store is not None
        rides, bad = [], []
        for row in frame.collect():
            if row["bad_field"] is not None:
                bad.append(BadRow(row["journal"], row["offset"], row["bad_field"], row["bad_reason"]))
            else:
                rides.append(StoredRide(_ride_of(row), row["journal"], row["offset"]))
        for b in bad:
            if self.settings.on_bad_row == "stop":
                raise BadRecordError(b)
            log.warning("journal=%s offset=%d bad record skipped: %s: %s", b.journal, b.offset, b.field, b.reason)
        outcome = self.store.write_batch(batch_id, rides, bad)
        what = "replayed: nothing written" if outcome.replayed else f"rides={outcome.rides} bad={outcome.bad_rows}"
        self.report(f"rides batch {batch_id}: {what}")


def _ride_of(row: Any) -> Ride:
    from datetime import datetime

    return Ride(uuid=row["uuid"], bike_id=row["bike_id"], trip_duration_s=row["trip_duration_s"],
                start_time=datetime.fromisoformat(row["start_time"]), end_time=datetime.fromisoformat(row["end_time"]),
                start_station_id=row["start_station_id"], start_station_name=row["start_station_name"],
                end_station_id=row["end_station_id"], end_station_name=row["end_station_name"])


def parsed_rides(spark: Any, s: BikeShareSettings, name: str) -> Any:
    """The rides journals as a stream of parsed rows (one source per query)."""
    source = (spark.readStream.format("herald").option("broker", s.broker).option("selector", s.rides)
              .option("stateLocation", str(Path(s.checkpoint) / f"{name}-source"))
              .option("onDecodeError", "skip" if s.on_bad_row == "skip" else "fail")
              .option("maxBytesPerTrigger", str(s.max_bytes_per_trigger)).load())
    return source.select("journal", "begin", "value").mapInPandas(parse_frames, PARSED_SCHEMA)


def _trigger(writer: Any, s: BikeShareSettings) -> Any:
    from herald.pipelines.streaming import with_trigger

    return with_trigger(writer, s.trigger)


def start_cycles(spark: Any, s: BikeShareSettings) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    found = (parsed_rides(spark, s, "cycles").where("bad_field IS NULL").groupBy("bike_id")
             .applyInPandasWithState(cycles_of_bike(s.min_length), "key string, value string", "path string",
                                     "append", GroupStateTimeout.NoTimeout))
    writer = (found.writeStream.format("herald").queryName("bike-share-cycles").outputMode("append")
              .option("broker", s.broker).option("selector", s.cycles).option("mapping", "modulo")
              .option("checkpointLocation", str(Path(s.checkpoint) / "cycles")))
    return _trigger(writer, s).start()


def start_rides(spark: Any, s: BikeShareSettings, rides_writer: RidesWriter) -> Any:
    writer = (parsed_rides(spark, s, "rides").writeStream.queryName("bike-share-rides").foreachBatch(rides_writer)
              .option("checkpointLocation", str(Path(s.checkpoint) / "rides")))
    query = _trigger(writer, s).start()
    if rides_writer.store is None:
        rides_writer.open(str(query.id))
    return query


#: Spark gives a new Python worker a fixed 10 s to connect back; on a loaded machine a
#: source runner can miss it. The query has done nothing yet, so starting it again is safe.
TRANSIENT = "Python worker failed to connect back"
RESTARTS = 3


def run_bike_share(spark: Any, s: BikeShareSettings, report: Callable[[str], None] = print) -> None:
    """Run both queries until an available-now run is done (or one fails, or Ctrl-C).
    Raises the failure — `FencedError` when a newer driver took over the store."""
    import herald.spark
    from herald.pipelines.streaming import prepare_queries

    herald.spark.register(spark)
    prepare_queries(spark)
    rides_writer = RidesWriter(s, report)
    starters = [lambda: start_rides(spark, s, rides_writer), lambda: start_cycles(spark, s)]
    queries = [start() for start in starters]
    restarts = 0
    try:
        while True:
            for i, q in enumerate(queries):
                failure = None if q.isActive else q.exception()
                if failure is None:
                    continue
                if TRANSIENT not in str(failure) or rides_writer.failure is not None or restarts >= RESTARTS:
                    raise rides_writer.failure or failure
                restarts += 1
                log.warning("restarting query %s: %s", q.name, TRANSIENT)
                queries[i] = starters[i]()
            if not any(q.isActive for q in queries):
                break
            for q in queries:
                _await(q, POLL_S)
    except KeyboardInterrupt:
        log.warning("interrupted: stopping the bike-share queries")
    finally:
        for q in queries:
            if q.isActive:
                q.stop()


def _await(query: Any, timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for ``query`` to end. A failed query's exception is
    looked at by the caller (``query.exception()``), not raised from here."""
    try:
        query.awaitTermination(timeout_s)
    except Exception:  # noqa: BLE001 — pyspark raises the query's failure; the caller reads it
        return

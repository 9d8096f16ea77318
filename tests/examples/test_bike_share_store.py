"""The exactly-once ride store on a real PostgreSQL: replays change nothing, zombies are fenced,
and the history API serves what it holds (400 naming the field on a bad parameter)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timedelta

import psycopg
import pytest
from aiohttp.test_utils import TestClient, TestServer

from herald.examples.bike_share.api import make_app
from herald.examples.bike_share.rides import Ride
from herald.examples.bike_share.store import BadRow, FencedError, RideStore, StoredRide

T0 = datetime(2019, 9, 1, 8)


def ride(bike_id: int, n: int) -> StoredRide:
    start = T0 + timedelta(hours=n)
    r = Ride(str(uuid.uuid1()), bike_id, 600, start, start + timedelta(minutes=10), 3000 + n, f"S{n}",
             3001 + n, f"S{n + 1}")
    return StoredRide(r, "examples/bike-share/rides/part-000", 100 * n)


def table(dsn: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        rides = conn.execute('SELECT uuid::text, bike_id, "offset" FROM rides ORDER BY uuid').fetchall()
        bad = conn.execute('SELECT journal, "offset", field FROM bad_rides ORDER BY "offset"').fetchall()
        ckpt = conn.execute("SELECT query_id, batch_id, fence FROM herald_checkpoints").fetchall()
    return [rides, bad, ckpt]


def test_a_replayed_batch_changes_nothing(bike_db):
    store = RideStore(bike_db, "q1", history=10)
    assert store.open() == -1
    first = [ride(1, n) for n in range(3)]
    assert not store.write_batch(0, first, [BadRow("j", 7, "bikeid", "want an integer")]).replayed
    before = table(bike_db)
    again = store.write_batch(0, first, [BadRow("j", 7, "bikeid", "want an integer")])
    assert again.replayed and table(bike_db) == before
    # A restarted driver (new fence) replaying the same batch: nothing either.
    restarted = RideStore(bike_db, "q1", history=10)
    assert restarted.open() == 0
    assert restarted.write_batch(0, first, []).replayed
    assert table(bike_db)[:2] == before[:2]
    assert table(bike_db)[2] == [("q1", 0, 2)]


def test_a_zombie_driver_is_fenced_and_writes_nothing(bike_db):
    zombie, successor = RideStore(bike_db, "q1"), RideStore(bike_db, "q1")
    zombie.open()
    zombie.write_batch(0, [ride(1, 0)], [])
    successor.open()  # a newer driver on the same checkpoint bumps the fence
    before = table(bike_db)
    with pytest.raises(FencedError) as err:
        zombie.write_batch(1, [ride(1, 1)], [BadRow("j", 1, "record", "bad")])
    assert err.value.field == "fence" and "bumped to 2" in str(err.value)
    assert table(bike_db) == before
    assert not successor.write_batch(1, [ride(1, 1)], []).replayed
    assert table(bike_db)[2] == [("q1", 1, 2)]


def test_each_bike_keeps_its_most_recent_rides(bike_db):
    store = RideStore(bike_db, "q1", history=3)
    store.open()
    rides = [ride(1, n) for n in range(5)] + [ride(2, n) for n in range(2)]
    store.write_batch(0, rides[:4], [])
    store.write_batch(1, rides[4:], [])
    kept = {r[0] for r in table(bike_db)[0]}
    assert kept == {r.ride.uuid for r in rides[2:5] + rides[5:]}


def api_get(dsn: str, path: str) -> tuple[int, str, str]:
    """``GET path`` from the real aiohttp app on a loopback port: status, content type, body."""
    async def get() -> tuple[int, str, str]:
        async with TestClient(TestServer(make_app(dsn))) as client:
            resp = await client.get(path)
            return resp.status, resp.content_type, await resp.text()
    return asyncio.run(get())


def test_the_api_serves_a_bikes_recent_rides_as_ndjson(bike_db):
    store = RideStore(bike_db, "q1", history=20)
    store.open()
    rides = [ride(38536, n) for n in range(4)]
    store.write_batch(0, rides, [])
    status, content_type, text = api_get(bike_db, "/api/bikes?id=38536&limit=3")
    assert status == 200 and content_type == "application/x-ndjson"
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["UUID"] for line in lines] == [r.ride.uuid for r in rides[1:]]
    assert lines[0]["StartStation"] == "S1" and lines[0]["StartTime"] == "2019-09-01T09:00:00"
    assert api_get(bike_db, "/api/bikes?id=1")[::2] == (200, "")


@pytest.mark.parametrize(("query", "field"), [
    ("", "id"), ("id=", "id"), ("id=abc", "id"), ("id=-1", "id"), ("id=99999999999", "id"),
    ("id=1&limit=0", "limit"), ("id=1&limit=x", "limit"), ("id=1&limit=100000", "limit"),
    ("id=%00%ff", "id"), ("id=1&id=2&limit=1e3", "limit"),
])
def test_a_bad_parameter_is_a_400_naming_the_field(bike_db, query, field):
    status, content_type, text = api_get(bike_db, f"/api/bikes?{query}")
    assert status == 400 and content_type == "application/json"
    body = json.loads(text)
    assert body["field"] == field and body["status"] == "INVALID_ARGUMENT", body

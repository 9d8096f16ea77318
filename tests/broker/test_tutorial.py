"""The seed tutorial ("Brokers: A Tutorial Introduction") against a real broker."""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json

import httpx

from herald.testing import apply_specs
from herald.testing.tutorial import tutorial_spec

TUTORIAL_SPEC = tutorial_spec()
FIRST = b'{"Msg": "Hello, Gazette!"}\n{"Msg": "See you later alligator"}\n'


def test_tutorial_appends_and_reads(broker):
    apply_specs(broker.url, TUTORIAL_SPEC, expect_mod_revision=0)
    with broker.client() as http:
        put = http.put("/example/journal", content=FIRST)
        assert put.status_code == 204
        assert put.headers["X-Commit-Begin"] == "0"
        assert put.headers["X-Commit-End"] == str(len(FIRST))
        assert put.headers["X-Write-Head"] == str(len(FIRST))
        assert put.headers["X-Commit-SHA1-Sum"] == hashlib.sha1(FIRST).hexdigest()

        read = http.get("/example/journal")
        assert read.status_code == 206
        assert read.content == FIRST
        assert read.headers["X-Write-Head"] == str(len(FIRST))
        assert read.headers["X-Fragment-Name"].startswith("0000000000000000-")

        at16 = http.get("/example/journal", params={"offset": 16})
        assert at16.content == b'Gazette!"}\n{"Msg": "See you later alligator"}\n'
        assert at16.headers["Content-Range"].startswith("bytes 16-")


def test_raced_appends_each_land_whole(broker):
    apply_specs(broker.url, TUTORIAL_SPEC)
    bodies = [f'{{"Msg": "Race!", "N": {i}}}\n'.encode() for i in range(1, 21)]

    def put(body):
        with broker.client() as http:
            return http.put("/example/journal", content=body).status_code

    with cf.ThreadPoolExecutor(20) as pool:
        assert set(pool.map(put, bodies)) == {204}
    with broker.client() as http:
        lines = http.get("/example/journal").content.splitlines(keepends=True)
    assert sorted(lines) == sorted(bodies)
    assert {json.loads(line)["N"] for line in lines} == set(range(1, 21))


def test_blocking_read_at_write_head_receives_a_later_append(broker):
    apply_specs(broker.url, TUTORIAL_SPEC)
    with broker.client() as http:
        http.put("/example/journal", content=FIRST)
        with http.stream("GET", "/example/journal", params={"block": "true", "offset": -1}) as resp:
            # Headers arrive once the read is positioned at the write head.
            assert resp.status_code == 206
            assert resp.headers["Content-Range"].startswith(f"bytes {len(FIRST)}-")
            later = b'{"Msg": "streamed"}\n'
            assert httpx.put(f"{broker.url}/example/journal", content=later).status_code == 204
            assert next(resp.iter_raw()) == later


def test_non_blocking_read_at_write_head_is_416_with_write_head(broker):
    apply_specs(broker.url, TUTORIAL_SPEC)
    with broker.client() as http:
        http.put("/example/journal", content=FIRST)
        resp = http.get("/example/journal", params={"offset": -1})
    assert resp.status_code == 416
    assert resp.json()["status"] == "OFFSET_NOT_YET_AVAILABLE"
    assert resp.headers["X-Write-Head"] == str(len(FIRST))


def test_head_gives_metadata_only(broker):
    apply_specs(broker.url, TUTORIAL_SPEC)
    with broker.client() as http:
        http.put("/example/journal", content=FIRST)
        resp = http.head("/example/journal", params={"offset": 5})
    assert resp.status_code == 200
    assert resp.content == b""
    assert resp.headers["X-Write-Head"] == str(len(FIRST))
    assert resp.headers["Content-Range"].startswith("bytes 5-")

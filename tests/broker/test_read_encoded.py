"""Reads answered in the stored SNAPPY framing (`herald.broker.encoded_read`): a
client that asks gets the stored chunks holding its range, with the usual headers
and where the decoded body begins and ends; Herald's client decodes them into the
same bytes at the same offsets as a decoded answer; reads not held whole in local
SNAPPY fragments, blocking reads and clients that do not ask are answered
decoded, as before."""

from __future__ import annotations

import httpx
import pytest

from herald.client import BrokerClient, RetryReader
from herald.fragment.codecs import decompress
from herald.protocol.journal import CompressionCodec
from herald.testing.waiting import wait_until
from tests.broker.test_read_decode import RECORD_BYTES, RECORDS, _fill, _open_fragment_files

SNAPPY_FRAMED = "x-snappy-framed"
FRAGMENT_END = 4 * RECORD_BYTES
PERSISTED_END = RECORDS * RECORD_BYTES
CHUNK_CONTENT = 1 << 16
RANGES = [(0, PERSISTED_END), (1, FRAGMENT_END), (2_500_000, FRAGMENT_END + 700_001), (2_500_000, 2_500_007),
          (FRAGMENT_END - 5, FRAGMENT_END + 5), (FRAGMENT_END, PERSISTED_END), (PERSISTED_END - 3, PERSISTED_END)]


@pytest.fixture
def snappy(broker):
    with broker.client() as http:
        yield http, _fill(http, "encoded/snappy", "SNAPPY")


def _get(http: httpx.Client, offset: int, end_offset: int, **params) -> httpx.Response:
    return http.get("/encoded/snappy", params={"offset": offset, "end_offset": end_offset, **params},
                    headers={"Accept-Encoding": SNAPPY_FRAMED})


def test_an_asking_client_gets_the_stored_chunks_of_its_range(snappy):
    http, content = snappy
    for offset, end_offset in RANGES:
        read = _get(http, offset, end_offset)
        assert read.status_code == 206
        assert read.headers["Content-Encoding"] == SNAPPY_FRAMED
        assert read.headers["Content-Range"].startswith(f"bytes {offset}-")
        assert read.headers["X-Fragment-Name"].endswith(".sz")
        assert read.headers["X-Write-Head"] == str(len(content))
        begin, end = int(read.headers["X-Encoded-Begin"]), int(read.headers["X-Encoded-End"])
        assert begin <= offset and end == end_offset
        decoded = decompress(read.content, CompressionCodec.SNAPPY)
        assert decoded[offset - begin:end - begin] == content[offset:end_offset], (offset, end_offset)
        assert offset - begin < CHUNK_CONTENT and len(decoded) < end - begin + CHUNK_CONTENT, \
            "only the chunks holding the range are sent"


def test_reads_not_held_whole_in_snappy_fragments_are_answered_decoded(snappy):
    http, content = snappy
    for offset, end_offset, params in [(0, 0, {}), (PERSISTED_END - 3, PERSISTED_END + 2, {}),
                                       (0, PERSISTED_END, {"block": "true"})]:
        read = _get(http, offset, end_offset, **params)
        assert read.status_code == 206
        assert "Content-Encoding" not in read.headers and "X-Encoded-Begin" not in read.headers
        assert read.content == content[offset:end_offset or None]
    plain = http.get("/encoded/snappy", params={"offset": 0, "end_offset": FRAGMENT_END})
    assert "Content-Encoding" not in plain.headers and plain.content == content[:FRAGMENT_END]


def test_herald_client_reads_the_same_bytes_at_the_same_offsets(broker, snappy):
    _http, content = snappy
    with BrokerClient(broker.url) as client:
        for offset, end_offset in [*RANGES, (0, 0), (PERSISTED_END - 3, 0)]:
            with client.read("encoded/snappy", offset, end_offset) as reader:
                chunks = list(reader)
                encoding = reader._response.headers.get("Content-Encoding")
            assert encoding == (SNAPPY_FRAMED if end_offset else None)
            assert b"".join(c for _, c in chunks) == content[offset:end_offset or None], (offset, end_offset)
            assert [o for o, _ in chunks] == [offset + sum(len(c) for _, c in chunks[:i]) for i in range(len(chunks))]
            with RetryReader(client, "encoded/snappy", offset, block=False, end_offset=end_offset) as retrying:
                assert b"".join(c for _, c in retrying) == content[offset:end_offset or None]
                assert retrying.statistics()["opens"] == 1


def test_readers_that_go_away_mid_body_leave_no_fragment_file_open(broker, snappy):
    _http, _content = snappy
    for offset in (0, 3_000_000):
        with httpx.Client(base_url=broker.url, timeout=60) as reader, \
                reader.stream("GET", "/encoded/snappy", params={"offset": offset, "end_offset": PERSISTED_END},
                              headers={"Accept-Encoding": SNAPPY_FRAMED}) as read:
            assert read.headers["Content-Encoding"] == SNAPPY_FRAMED
            next(read.iter_raw())
    wait_until(lambda: not _open_fragment_files(broker), "the broker to close every fragment file")

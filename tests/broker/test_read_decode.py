"""Reads of persisted SNAPPY and ZSTANDARD fragments, which the broker cuts into
segments and decodes several at once into recycled buffers
(`herald.broker.fragment_decode`): every byte in order from any offset — mid
fragment past whole segments, across fragments, to an ``end_offset`` inside one —
with the gateway's headers and chunked framing unchanged, and a blocking read
going on from the persisted fragments into new appends."""

from __future__ import annotations

import os
import threading

import httpx
import pytest

from herald.client import BrokerClient
from herald.testing import apply_specs, journal_spec
from herald.testing.waiting import wait_until
from tests.broker.s3_helpers import persisted_through

RECORD_BYTES = 1_100_000  # four make a 4.4 MB fragment: several snappy segments, two zstd frames
RECORDS = 8
EXTENSIONS = {"SNAPPY": ".sz", "ZSTANDARD": ".zst"}


def _record(i: int) -> bytes:
    text = b"".join(b'{"record":%d,"line":%d}\n' % (i, n) for n in range(30_000))[:RECORD_BYTES // 2]
    return (os.urandom(RECORD_BYTES // 2) + text)[:RECORD_BYTES - 1] + b"\n"


def _fill(http: httpx.Client, journal: str, codec: str) -> bytes:
    apply_specs(str(http.base_url), journal_spec(journal, length=4 << 20, compression_codec=codec))
    # A last small append rolls the second fragment and stays in the spool.
    records = [_record(i) for i in range(RECORDS)] + [b'{"rolled":true}\n']
    for record in records:
        assert http.put(f"/{journal}", content=record).status_code == 204
    persisted_through(http, journal, RECORDS * RECORD_BYTES)
    return b"".join(records)


@pytest.mark.parametrize("codec", ["SNAPPY", "ZSTANDARD"])
def test_reads_from_any_offset_return_every_byte_with_unchanged_headers(broker, codec):
    journal = f"decode/{codec.lower()}"
    with broker.client() as http:
        content = _fill(http, journal, codec)
        fragment_end = 4 * RECORD_BYTES
        for offset, end_offset in [(0, 0), (1, 0), (2_500_000, 0), (2_500_000, fragment_end + 700_001),
                                   (fragment_end - 5, fragment_end + 5), (len(content) - 3, 0)]:
            read = http.get(f"/{journal}", params={"offset": offset, "end_offset": end_offset})
            assert read.status_code == 206
            assert read.content == content[offset:end_offset or None], (offset, end_offset)
            assert read.headers["Content-Range"].startswith(f"bytes {offset}-")
            if offset < RECORDS * RECORD_BYTES:  # else in the spool: sent by sendfile
                assert read.headers["Transfer-Encoding"] == "chunked"
                assert read.headers["X-Fragment-Name"].endswith(EXTENSIONS[codec])
            assert read.headers["X-Write-Head"] == str(len(content))


@pytest.mark.parametrize("codec", ["SNAPPY", "ZSTANDARD"])
def test_many_reads_at_once_each_get_their_own_bytes(broker, codec):
    """Recycled buffers belong to one read: concurrent readers never see another's."""
    journal = f"decode/concurrent-{codec.lower()}"
    with broker.client() as http:
        content = _fill(http, journal, codec)
    offsets = [0, 1_000_003, 3_000_001, 5_500_000]
    got: dict[int, bytes] = {}

    def read(offset: int) -> None:
        with httpx.Client(base_url=broker.url, timeout=60) as http:
            got[offset] = http.get(f"/{journal}", params={"offset": offset}).content

    threads = [threading.Thread(target=read, args=(o,)) for o in offsets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert {o: got.get(o) == content[o:] for o in offsets} == {o: True for o in offsets}


def test_blocking_read_goes_on_from_fragments_into_new_appends(broker):
    with broker.client() as http:
        content = _fill(http, "decode/blocking", "ZSTANDARD")
        more = b'{"appended":"after the read reached the head"}\n'
        reached_head = threading.Event()
        chunks: list[bytes] = []

        def read() -> None:
            with BrokerClient(broker.url) as client, \
                    client.read("decode/blocking", 3_000_000, len(content) + len(more), block=True) as reader:
                for offset, chunk in reader:
                    chunks.append(bytes(chunk))
                    if offset + len(chunk) == len(content):
                        reached_head.set()

        reader = threading.Thread(target=read)
        reader.start()
        assert reached_head.wait(60), "the blocking read did not reach the write head"
        assert http.put("/decode/blocking", content=more).status_code == 204
        reader.join(60)
    assert b"".join(chunks) == content[3_000_000:] + more


def _open_fragment_files(broker) -> list[str]:
    names = []
    for fd in os.listdir(f"/proc/{broker.proc.pid}/fd"):
        try:
            names.append(os.readlink(f"/proc/{broker.proc.pid}/fd/{fd}"))
        except OSError:
            pass  # closed meanwhile
    return [n for n in names if n.endswith(tuple(EXTENSIONS.values()))]


@pytest.mark.parametrize("codec", ["SNAPPY", "ZSTANDARD"])
def test_reads_abandoned_while_the_next_fragment_decodes_close_its_file(broker, codec):
    """A read near a fragment's end already decodes the next fragment
    (`herald.broker.read._NextFragment`): readers that go away there, or that stop
    at an ``end_offset`` inside it, leave no fragment file open in the broker."""
    journal = f"decode/abandoned-{codec.lower()}"
    with broker.client() as http:
        content = _fill(http, journal, codec)
        for offset in (0, 1, 3_000_000):
            with httpx.Client(base_url=broker.url, timeout=60) as reader, \
                    reader.stream("GET", f"/{journal}", params={"offset": offset}) as read:
                first = next(read.iter_raw())
            assert content[offset:].startswith(first)
        fragment_end = 4 * RECORD_BYTES
        read = http.get(f"/{journal}", params={"offset": fragment_end - 10, "end_offset": fragment_end + 10})
        assert read.content == content[fragment_end - 10:fragment_end + 10]
    wait_until(lambda: not _open_fragment_files(broker), "the broker to close every fragment file")

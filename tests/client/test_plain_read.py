"""Streamed reads of a sync client of an ``http://`` broker (`herald.client.plain_read`):
the same bytes, offsets and head as the async client's over httpx, chunked (SNAPPY
fragments, several segments) or with a length (a zero-copy spool read); a finished
read's connection is reused, and one the broker dropped replaced; `close` from
another thread ends a blocked read with a transport error; a body cut short
raises httpx's RemoteProtocolError, as through httpx."""

from __future__ import annotations

import asyncio
import socket
import threading

import httpx
import pytest

from herald.client import AsyncBrokerClient, BrokerClient
from herald.client.plain_read import StreamedResponse
from herald.client.transient import is_transient
from herald.testing import wait_persisted
from tests.client.client_helpers import create

LINE = b'{"user": %7d, "event": "view", "page": "/catalog/item/%d", "pad": "%s"}\n'


def _content(n_bytes: int, seed: int) -> bytes:
    lines, size, i = [], 0, 0
    while size < n_bytes:
        line = LINE % (seed * 1_000_000 + i, i % 977, b"y" * (i % 61))
        lines.append(line)
        size, i = size + len(line), i + 1
    return b"".join(lines)


def _async_read(url: str, journal: str, offset: int, end_offset: int) -> tuple[list, object]:
    async def read() -> tuple[list, object]:
        async with AsyncBrokerClient(url, timeout_s=10) as aclient:
            reader = aclient.read(journal, offset, end_offset)
            return [c async for c in reader], reader.head
    return asyncio.run(read())


def _joined(chunks: list[tuple[int, bytes]], offset: int) -> bytes:
    for at, chunk in chunks:  # each chunk's offset follows the one before
        assert at == offset
        offset += len(chunk)
    return b"".join(chunk for _, chunk in chunks)


@pytest.mark.parametrize("codec", ["SNAPPY", "NONE"])
def test_plain_reads_give_the_bytes_offsets_and_head_of_httpx_reads(broker, client, codec):
    journal = f"pr/{codec.lower()}"
    create(client, journal, length=4 << 20, compression_codec=codec)
    content = b"".join(client.append(journal, body) and body
                       for body in (_content(5 << 20, 1), _content(5 << 20, 2), b"tail\n"))
    wait_persisted(client, journal, 2, through=len(content) - 5)  # the tail stays in a spool
    for offset, end in ((0, 0), (1_000_003, len(content) - 7), (len(content) - 3, 0)):
        with client.read(journal, offset, end) as reader:
            chunks = list(reader)
            head = reader.head
        assert isinstance(reader._response, StreamedResponse)
        async_chunks, async_head = _async_read(broker.url, journal, offset, end)
        assert _joined(chunks, offset) == _joined(async_chunks, offset) == content[offset:end or None]
        assert head == async_head
        # The caller's to keep: bytes, or fresh bytearrays where the client decoded stored chunks.
        assert all(type(chunk) in (bytes, bytearray) for _, chunk in chunks)
        assert len({id(chunk) for _, chunk in chunks}) == len(chunks)


def test_a_finished_read_leaves_its_connection_for_the_next(broker, client):
    create(client, "pr/keep")
    client.append("pr/keep", b"kept\n")
    assert list(client.read("pr/keep")) == [(0, b"kept\n")]
    assert client._reads is not None and len(client._reads._idle) == 1
    kept = client._reads._idle[0]
    assert list(client.read("pr/keep", 2)) == [(2, b"pt\n")]
    assert client._reads._idle == [kept]
    broker.restart()  # kill -9, same port: the kept connection is dead
    assert list(client.read("pr/keep")) == [(0, b"kept\n")]
    assert client._reads._idle and client._reads._idle != [kept]


def test_close_from_another_thread_ends_a_blocked_read(client):
    create(client, "pr/tail")
    client.append("pr/tail", b"old\n")
    reader = client.read("pr/tail", 4, block=True)
    reader.open()  # positioned at the write head: its body waits for appends
    failed: list[BaseException] = []

    def iterate() -> None:
        try:
            next(reader)
        except BaseException as err:  # noqa: BLE001 - the test inspects it
            failed.append(err)

    thread = threading.Thread(target=iterate)
    thread.start()
    reader.close()
    thread.join(30)
    assert not thread.is_alive()
    assert len(failed) == 1 and isinstance(failed[0], httpx.TransportError)


def _cut_short_server() -> tuple[socket.socket, threading.Thread]:
    """A peer answering every GET with the head of a chunked 206 and half a chunk,
    then closing the connection."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        for _ in range(2):
            conn, _ = server.accept()
            with conn:
                while b"\r\n\r\n" not in conn.recv(65536):
                    pass
                conn.sendall(b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-1/2\r\n"
                             b"X-Write-Head: 100\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nhalf")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


def test_a_body_cut_short_raises_remote_protocol_error_as_httpx_does():
    server, thread = _cut_short_server()
    url = f"http://127.0.0.1:{server.getsockname()[1]}"
    try:
        with BrokerClient(url, timeout_s=10, plain=True) as c, pytest.raises(httpx.RemoteProtocolError) as err:
            list(c.read("pr/cut"))
        assert is_transient(err.value)
        with pytest.raises(httpx.RemoteProtocolError):
            _async_read(url, "pr/cut", 0, 0)
        thread.join(30)
    finally:
        server.close()

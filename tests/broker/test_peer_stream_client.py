"""The primary's end of a replication stream (`PeerStream`, a plain asyncio
connection) against peers that answer badly: whatever a peer sends — an answer to
no frame, an error document, a line past the limit, bytes that are not HTTP, a
connection cut inside an answer — every frame not yet answered fails, the
pipeline hears of it once, and no frame is ever taken as answered by mistake
[I-APPEND-3]. The peer here is a socket server speaking raw bytes, standing in
for a broken or hostile broker; the well-behaved peer is a real broker in
test_replication_stream.py."""

from __future__ import annotations

import asyncio

import pytest

from herald.broker.peer_stream import MAX_HEAD_BYTES, PeerStream
from herald.protocol.errors import HeraldError, Status

OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
SUM = "a" * 40


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _serve(reply: bytes, frames: int) -> tuple[asyncio.Server, list[bytes]]:
    """A peer that reads the request until ``frames`` chunks arrived, then sends
    ``reply`` and closes; what it received is kept."""
    received: list[bytes] = []

    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = b""
        while data.count(b"\r\n") < 6 + 2 * frames and (more := await reader.read(1 << 16)):
            data += more
        received.append(data)
        writer.write(reply)
        await writer.drain()
        writer.close()

    return await asyncio.start_server(peer, "127.0.0.1", 0), received


def _run(reply: bytes, frames: int = 2) -> tuple[list, list[HeraldError], list[bytes]]:
    async def main():
        server, received = await _serve(reply, frames)
        port = server.sockets[0].getsockname()[1]
        failures: list[HeraldError] = []
        stream = PeerStream(f"http://127.0.0.1:{port}", "a/journal", {"Authorization": "Bearer t"},
                            failures.append)
        answers = [stream.send(b'{"frame":%d}\n' % i) for i in range(frames)]
        outcomes = await asyncio.wait_for(asyncio.gather(*answers, return_exceptions=True), 30)
        assert stream.closed
        server.close()
        return outcomes, failures, received

    return asyncio.run(main())


def test_answers_arrive_in_order_and_the_request_carries_the_frames_as_chunks():
    outcomes, failures, received = _run(OK_HEAD + chunk(b'{"sum":"%s"}\n{"sum":"' % SUM.encode())
                                        + chunk(b'%s"}\n' % (b"b" * 40)) + b"0\r\n\r\n")
    assert outcomes == [SUM, "b" * 40] and failures == []  # a line split across chunks is whole
    head, _, body = received[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/replicate/stream?journal=a%2Fjournal HTTP/1.1\r\n")
    assert b"\r\nAuthorization: Bearer t" in head and b"\r\nTransfer-Encoding: chunked" in head
    assert body == chunk(b'{"frame":0}\n') + chunk(b'{"frame":1}\n')


def test_a_graceful_close_takes_no_more_frames_and_still_gets_every_answer():
    async def main():
        server, received = await _serve(OK_HEAD + chunk(b'{"sum":"%s"}\n' % SUM.encode()) * 2 + b"0\r\n\r\n", 2)
        port = server.sockets[0].getsockname()[1]
        failures: list[HeraldError] = []
        # No extra header: the peer reads on until the body's last chunk (a head of
        # five lines, two per chunk), so it answers only once the body ended.
        stream = PeerStream(f"http://127.0.0.1:{port}", "j", {}, failures.append)
        answers = [stream.send(b"one\n"), stream.send(b"two\n")]
        stream.close(graceful=True)  # before the connection is even open
        assert stream.closed  # a pipeline opens a new stream for its next group
        assert isinstance(stream.send(b"three\n").exception(), HeraldError)
        assert await asyncio.wait_for(asyncio.gather(*answers), 30) == [SUM, SUM]
        server.close()
        assert failures == [] and received[0].endswith(chunk(b"two\n") + b"0\r\n\r\n")

    asyncio.run(main())


BAD_PEERS = [
    # an error line: that frame and every later one fail with the peer's error
    (OK_HEAD + chunk(b'{"sum":"%s"}\n{"error":{"status":"PROPOSAL_MISMATCH","message":"behind"}}\n' % SUM.encode()),
     Status.PROPOSAL_MISMATCH, 1),
    (b"HTTP/1.1 403 Forbidden\r\nContent-Length: 49\r\n\r\n"
     b'{"status":"PERMISSION_DENIED","message":"token"}\n', Status.PERMISSION_DENIED, 0),
    (OK_HEAD + chunk(b'{"sum":"%s"}\n{"sum":7}\n' % SUM.encode()), Status.INSUFFICIENT_JOURNAL_BROKERS, 1),
    (OK_HEAD + chunk(b"x" * (MAX_HEAD_BYTES + 1)), Status.INSUFFICIENT_JOURNAL_BROKERS, 0),
    (OK_HEAD + chunk(b"[1, 2]\n"), Status.INSUFFICIENT_JOURNAL_BROKERS, 0),
    (OK_HEAD + chunk(b'{"sum":"%s"}\n{"sum":"b' % SUM.encode()), Status.INSUFFICIENT_JOURNAL_BROKERS, 1),  # cut
    (b"SSH-2.0-OpenSSH\r\n\r\n", Status.INSUFFICIENT_JOURNAL_BROKERS, 0),
    (OK_HEAD + b"zz\r\n", Status.INSUFFICIENT_JOURNAL_BROKERS, 0),  # a chunk size that is not hex
    (b"", Status.INSUFFICIENT_JOURNAL_BROKERS, 0),  # closed without a word
]


@pytest.mark.parametrize(("reply", "status", "answered"), BAD_PEERS)
def test_a_bad_peer_fails_every_frame_it_did_not_answer_and_is_heard_once(reply, status, answered):
    outcomes, failures, _ = _run(reply)
    assert outcomes[:answered] == [SUM] * answered
    assert all(isinstance(o, HeraldError) and o.status is status for o in outcomes[answered:])
    assert len(failures) == 1 and failures[0].status is status


def test_a_peer_that_cannot_be_reached_fails_the_frames_sent_before_the_connection():
    async def main():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()  # nothing listens on port now
        failures: list[HeraldError] = []
        stream = PeerStream(f"http://127.0.0.1:{port}", "j", {}, failures.append)
        answer = stream.send(b"frame\n")
        with pytest.raises(HeraldError) as err:
            await asyncio.wait_for(answer, 30)
        assert err.value.status is Status.INSUFFICIENT_JOURNAL_BROKERS and len(failures) == 1
        assert stream.closed
        late = stream.send(b"late\n")  # a closed stream refuses at once
        assert isinstance(late.exception(), HeraldError)

    asyncio.run(main())


def test_a_header_that_would_split_the_request_is_refused():
    async def main():
        failures: list[HeraldError] = []
        stream = PeerStream("http://127.0.0.1:9", "j", {"X-Evil": "a\r\nX-Injected: 1"}, failures.append)
        with pytest.raises(HeraldError, match="cannot carry"):
            await asyncio.wait_for(stream.send(b"frame\n"), 30)

    asyncio.run(main())

"""The replication stream (``POST /v1/replicate/stream``, herald.broker.peer_stream):
a peer applies a primary's frames strictly in order, answers each only once it is
durable, and stops at the first failure, so a group sent after a failed one is
never applied nor answered [I-APPEND-3] [I-APPEND-2]; a hostile frame is refused
naming its field and writes nothing.

Against a real one-broker cluster that is primary and replica of its journal
(`peer_served`), with real peer credentials, as in test_hostile_specs.
"""

from __future__ import annotations

import asyncio
from hashlib import sha1
from urllib.parse import urlsplit

import httpx
import orjson
import pytest

from herald.broker.peer_stream import PeerStream, frame_head
from herald.protocol.errors import HeraldError, Status
from herald.protocol.labels import LabelSet
from tests.broker.test_hostile_specs import NAME, peer_headers, peer_served

__all__ = ["peer_served"]  # the fixture

pytestmark = pytest.mark.slow
SEED = b"seed\n"  # the seeded journal: one fragment from 0, its write head at 5


def frame(begin: int, content: bytes, fragment_begin: int = 0, registers: str = "") -> bytes:
    return frame_head(begin, fragment_begin, len(content), LabelSet.parse(registers)) + content


def stream(proc, body: bytes) -> list[dict]:
    resp = httpx.post(f"{proc.url}/v1/replicate/stream", params={"journal": NAME}, content=body,
                      headers=peer_headers(proc), timeout=30)
    assert resp.status_code == 200, resp.text
    return [orjson.loads(line) for line in resp.content.splitlines()]


def journal_bytes(proc) -> bytes:
    with proc.client() as http:
        return http.get(f"/{NAME}", params={"block": "false"}).content


def test_frames_commit_in_order_and_nothing_after_the_first_failure(peer_served):
    one, two, three = b"one\n", b"two\n", b"three\n"
    answers = stream(peer_served, frame(5, one) + frame(9, two)
                     + frame(9, b"stale\n")  # the offset two already took: refused
                     + frame(13, three))     # would fit, but follows a failed frame

    assert [set(a) for a in answers] == [{"sum"}, {"sum"}, {"error"}]  # nothing after the error
    # Each answer is the fragment's SHA1 with that group committed (the spool began at 0).
    assert [a["sum"] for a in answers[:2]] == [sha1(SEED + one).hexdigest(), sha1(SEED + one + two).hexdigest()]
    assert answers[2]["error"]["status"] == "PROPOSAL_MISMATCH"
    assert journal_bytes(peer_served) == SEED + one + two  # three never applied
    with peer_served.client() as http:  # the journal's own appends go on after it
        assert http.put(f"/{NAME}", content=b"after\n").headers["X-Commit-Begin"] == "13"


HOSTILE_FRAMES = [
    (b"{not json\n", "body"),
    (b"[1, 2]\n", "body"),
    (b'{"begin": 5, "fragment_begin": 0, "length": 4, "registers": ""}', "body"),  # no newline, no bytes
    (b'{"begin": 5, "fragment_begin": 0, "length": 40, "registers": ""}\nshort', "body"),  # cut short
    (b'{"begin": -5, "fragment_begin": 0, "length": 1, "registers": ""}\nx', "begin"),
    (b'{"begin": "5", "fragment_begin": 6, "length": 1, "registers": ""}\nx', "fragment_begin"),
    (b'{"begin": 5, "fragment_begin": 0, "length": 1e300, "registers": ""}\nx', "length"),
    (b'{"begin": 5, "fragment_begin": 0, "length": 9000000000000, "registers": ""}\nx', "length"),
    (b'{"begin": 9223372036854775807, "fragment_begin": 0, "length": 1, "registers": ""}\nx', "begin"),
    (b'{"begin": 5, "fragment_begin": 0, "length": 1, "registers": ["a"]}\nx', "registers"),
    (b'{"begin": 5, "fragment_begin": 0, "length": 1, "registers": "BAD NAME"}\nx', "registers"),
    (b"x" * (70 << 10) + b"\n", "body"),  # a header line past the limit
]


def test_a_hostile_frame_is_refused_naming_its_field_and_writes_nothing(peer_served):
    for body, field in HOSTILE_FRAMES:
        [answer] = stream(peer_served, body)  # one error line, then the stream ends

        assert (answer["error"]["status"], answer["error"]["field"]) == ("INVALID_ARGUMENT", field), body[:80]
        assert journal_bytes(peer_served) == SEED


def test_the_primary_side_fails_every_group_after_a_failed_one(peer_served):
    """`PeerStream`, as a primary holds it: of three frames in flight, the first is
    answered, the second refused, and the third fails with it (never applied)."""

    async def run() -> tuple[list, list[HeraldError]]:
        failures: list[HeraldError] = []
        peer = PeerStream(peer_served.url, NAME, peer_headers(peer_served), failures.append)
        answers = [peer.send(frame(5, b"one\n")), peer.send(frame(5, b"stale\n")), peer.send(frame(9, b"two\n"))]
        outcomes = await asyncio.wait_for(asyncio.gather(*answers, return_exceptions=True), 30)
        assert peer.closed
        return outcomes, failures

    outcomes, failures = asyncio.run(run())

    assert isinstance(outcomes[0], str) and len(outcomes[0]) == 40
    assert [type(o) for o in outcomes[1:]] == [HeraldError, HeraldError]
    assert outcomes[1].status is outcomes[2].status is Status.PROPOSAL_MISMATCH
    assert len(failures) == 1  # the pipeline heard once: it re-syncs before its next group
    assert journal_bytes(peer_served) == SEED + b"one\n"


def test_a_stream_dropped_mid_frame_applies_nothing_of_that_frame(peer_served):
    """A primary that dies mid-frame: the peer applied the whole frames before it only."""

    async def run() -> None:
        where = urlsplit(peer_served.url)
        reader, writer = await asyncio.open_connection(where.hostname, where.port)
        head = "".join(f"{k}: {v}\r\n" for k, v in peer_headers(peer_served).items())
        writer.write(f"POST /v1/replicate/stream?journal={NAME} HTTP/1.1\r\nHost: x\r\n{head}"
                     "Transfer-Encoding: chunked\r\n\r\n".encode())
        for chunk in (frame(5, b"one\n"), frame(9, b"two two two\n")[:-6]):
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()
        status = await reader.readline()
        assert b" 200 " in status, status
        while b"sum" not in await reader.readline():  # headers, then the first answer
            pass
        writer.transport.abort()  # the rest of the second frame never comes

    asyncio.run(run())
    assert journal_bytes(peer_served) == SEED + b"one\n"

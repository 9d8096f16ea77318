"""The append fast path (herald.broker.front) answers exactly as aiohttp's gateway does.

A plain ``PUT`` takes the fast path; the same append with a header the fast path
leaves to aiohttp (``Content-Encoding: identity``, accepted by the gateway) takes
the full gateway. Their answers must be the same bytes but for the date and the
offsets. Also: pipelined requests, a hand-off mid-connection, bodies in pieces,
and a body cut short appending nothing [I-APPEND-2].
"""

from __future__ import annotations

import hashlib
import re
import socket

import pytest

from herald.broker.front_http import HeadLimits, KnownHeads, error_answer, parse_put_head
from herald.protocol.errors import HeraldError, JournalNotFoundError, Status
from herald.testing import apply_specs, journal_spec, journals_state, seed_journal
from tests.broker.raw_http import connect, read_response, read_until_closed

NAME = "front/journal"
PATH = f"/{NAME}".encode()
LIMITS = HeadLimits(max_header_bytes=8190, max_headers=128, max_append_bytes=1 << 20)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from herald.testing import BrokerProcess

    proc = BrokerProcess(tmp_path_factory.mktemp("front")).start()
    seed_journal(proc, NAME)
    yield proc
    proc.kill()


def put(body: bytes, extra: bytes = b"", path: bytes = PATH) -> bytes:
    return (b"PUT " + path + b" HTTP/1.1\r\nHost: x\r\n" + extra
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def raw_exchange(url: str, request: bytes) -> bytes:
    """The whole raw answer to ``request`` on a connection the client then closes."""
    with connect(url) as sock:
        sock.sendall(request)
        sock.settimeout(15)
        raw = b""
        while b"\r\n\r\n" not in raw or not _whole(raw):
            chunk = sock.recv(65536)
            assert chunk, f"closed early: {raw!r}"
            raw += chunk
    return raw


def _whole(raw: bytes) -> bool:
    head, _, body = raw.partition(b"\r\n\r\n")
    length = re.search(rb"Content-Length: (\d+)", head)
    return length is None or len(body) >= int(length.group(1))


def normalised(raw: bytes) -> bytes:
    """Without what differs between two appends: the date and the offsets."""
    raw = re.sub(rb"Date: [^\r]*", b"Date: -", raw)
    return re.sub(rb"(X-Commit-Begin|X-Commit-End|X-Write-Head): \d+", rb"\1: -", raw)


@pytest.mark.parametrize("close", [False, True])
def test_a_fast_append_answers_the_bytes_the_gateway_does(served, close):
    extra = b"Connection: close\r\n" if close else b""
    fast = raw_exchange(served.url, put(b"fast\n", extra))
    full = raw_exchange(served.url, put(b"fast\n", extra + b"Content-Encoding: identity\r\n"))
    assert fast.startswith(b"HTTP/1.1 204 No Content\r\n")
    assert normalised(fast) == normalised(full)


def test_the_fast_error_answer_is_the_gateways(served):
    """The gateway's 404 for a journal that does not exist, against error_answer's."""
    full = raw_exchange(served.url, put(b"x", path=b"/front/none"))
    fast = error_answer(JournalNotFoundError("front/none"), close=False)
    assert normalised(fast) == normalised(full)


def test_an_error_answer_carries_the_write_head_header():
    answer = error_answer(HeraldError(Status.RESOURCE_EXHAUSTED, "out of disk", extra={"write_head": 7}), True)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\nX-Write-Head: 7\r\n")
    assert head.endswith(b"Connection: close") and b'"RESOURCE_EXHAUSTED"' in body


def test_pipelined_appends_then_a_read_are_answered_in_order(served):
    """Two appends and a GET in one send, then the client's half-close: the GET
    hands the connection to aiohttp with its bytes, after both appends were answered."""
    before = journals_state(served.url)[NAME][1]
    with connect(served.url) as sock:
        sock.sendall(put(b"one\n") + put(b"two\n")
                     + b"GET " + PATH + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        sock.shutdown(socket.SHUT_WR)
        raw = read_until_closed(sock)
    first, second, read = raw.split(b"HTTP/1.1 ")[1:]
    assert first.startswith(b"204 ") and second.startswith(b"204 ")
    assert re.search(rb"X-Commit-End: (\d+)", first)[1] == re.search(rb"X-Commit-Begin: (\d+)", second)[1]
    assert read.startswith(b"206 ") and (before + b"one\ntwo\n") in read.replace(b"\r\n", b"")


def test_a_body_sent_in_pieces_is_appended_whole(served):
    body = bytes(range(256)) * 1024  # 256 KiB, many reads
    with connect(served.url) as sock:
        request = put(body)
        for at in range(0, len(request), 7001):
            sock.sendall(request[at:at + 7001])
        answer = read_response(sock)
    assert answer is not None and answer.status == 204
    assert answer.headers["x-commit-sha1-sum"] == hashlib.sha1(body).hexdigest()
    begin, end = int(answer.headers["x-commit-begin"]), int(answer.headers["x-commit-end"])
    with served.client() as http:
        assert http.get(f"/{NAME}", params={"offset": begin, "end_offset": end}).content == body


def test_a_body_cut_short_appends_nothing(served):
    before = journals_state(served.url)
    with connect(served.url) as sock:
        sock.sendall(put(b"y" * 5000)[:-1000])
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    with served.client() as http:
        assert http.put(f"/{NAME}", content=b"after\n").headers["X-Commit-Begin"] == before[NAME][2]


def test_a_journal_made_read_only_refuses_the_next_fast_append(served):
    """Whether a journal takes fast appends is remembered per spec: re-applying it
    read-only must send the very next append to the gateway's refusal (a 403 naming
    the journal), on a connection that appended a moment before, changing nothing."""
    name = "front/read-only"
    seed_journal(served, name)
    path = f"/{name}".encode()
    with connect(served.url) as sock:
        sock.sendall(put(b"fast\n", path=path))
        assert read_response(sock).status == 204
        apply_specs(served.url, {**journal_spec(name), "flags": "O_RDONLY"})
        before = journals_state(served.url)[name]
        sock.sendall(put(b"refused\n", path=path))
        answer = read_response(sock)
    assert answer is not None and answer.status == 403
    assert b"is not writable" in answer.body and b'"journal"' in answer.body
    assert journals_state(served.url)[name][1:] == before[1:]


@pytest.mark.parametrize("head", [
    b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
    b"PUT /a HTTP/1.0\r\nHost: x\r\nContent-Length: 1\r\n\r\n",
    b"PUT /a?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n",
    b"PUT /a HTTP/1.1\r\nContent-Length: 1\r\n\r\n",  # no Host
    b"PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
    b"PUT /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nX-Check-Registers: a=b\r\n\r\n",
    b"PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nConnection: upgrade\r\n\r\n",
    b"PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\n",
    b"PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n",  # over the limit
    b"PUT /a/../b HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n",
    b"PUT /a HTTP/1.1\nHost: x\r\nContent-Length: 1\r\n\r\n",
    b"PUT /a HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\nContent-Length: 1\r\n\r\n",
])
def test_anything_but_a_plain_append_is_left_to_the_gateway(head):
    assert parse_put_head(head, LIMITS) is None
    heads = KnownHeads(LIMITS)
    assert heads.parse(head) is None and heads.parse(head) is None  # the second from memory


def test_a_known_head_parses_as_before_and_memory_stays_bounded():
    heads = KnownHeads(LIMITS)
    raw = b"PUT /front/journal HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n"
    first = heads.parse(raw)
    assert first is not None and first == parse_put_head(raw, LIMITS) and heads.parse(raw) is first
    for n in range(1, 3 * KnownHeads.MAX_HEADS):  # a hostile client: a new head every time
        assert heads.parse(b"PUT /front/journal HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n).content_length == n
    assert len(heads._known) <= KnownHeads.MAX_HEADS
    long = b"PUT /front/journal HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * 2000 + b"\r\nContent-Length: 1\r\n\r\n"
    assert heads.parse(long) is not None and long not in heads._known  # too long to keep


def test_a_plain_append_head_is_parsed():
    head = parse_put_head(b"PUT /a/b%2Dc HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n"
                          b"Connection: Close\r\n\r\n", LIMITS)
    assert head is not None
    assert (head.journal_name, head.content_length, head.close) == ("a/b-c", 12, True)


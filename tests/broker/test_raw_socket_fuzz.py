"""Hostile bytes on the gateway's journal paths, sent over a raw socket.

Malformed request lines, conflicting or oversized headers, smuggling-shaped
framing, truncated bodies: each gets a 4xx (or a closed connection), never a 5xx
or a traceback; the broker keeps serving; the journal is unchanged — a truncated
PUT body appends nothing [I-APPEND-2] — and nothing is logged as a broker error.
"""

from __future__ import annotations

import socket

import pytest

from herald.testing import journals_state, seed_journal
from tests.broker.raw_http import connect, exchange, parse, read_until_closed

NAME = "raw/journal"
PATH = f"/{NAME}".encode()


def put(headers: bytes, body: bytes = b"", path: bytes = PATH, line: bytes | None = None) -> bytes:
    line = line if line is not None else b"PUT " + path + b" HTTP/1.1"
    return line + b"\r\nHost: x\r\n" + headers + b"\r\n" + body


BIG = b"x" * 100_000
CASES = {
    # request lines
    "garbage": b"GARBAGE\r\n\r\n",
    "http-9.9": put(b"Content-Length: 3\r\n", b"abc", line=b"PUT " + PATH + b" HTTP/9.9"),
    "binary-method": b"\x00\x01\x02 " + PATH + b" HTTP/1.1\r\n\r\n",
    "lowercase-method": put(b"Content-Length: 3\r\n", b"abc", line=b"put " + PATH + b" HTTP/1.1"),
    "unknown-method": put(b"Content-Length: 3\r\n", b"abc", line=b"BREW " + PATH + b" HTTP/1.1"),
    "nul-in-path": put(b"Content-Length: 3\r\n", b"abc", path=b"/raw/jour\x00nal"),
    "newline-in-path": put(b"Content-Length: 3\r\n", b"abc", path=b"/raw%0Ajournal"),
    "nul-escaped-in-path": put(b"Content-Length: 3\r\n", b"abc", path=b"/raw%00journal"),
    "dot-dot-escaped": put(b"Content-Length: 3\r\n", b"abc", path=b"/raw/%2E%2E/%2E%2E/journal"),
    "absolute-uri": put(b"Content-Length: 3\r\n", b"abc", path=b"http://evil" + PATH),
    "huge-request-line": put(b"Content-Length: 3\r\n", b"abc", path=PATH + b"?" + BIG),
    "bad-percent-escape": put(b"Content-Length: 3\r\n", b"abc", path=b"/raw/jour%zznal"),
    "bad-query": b"GET " + PATH + b"?offset=%ff%fe&offset=1&block HTTP/1.1\r\nHost: x\r\n\r\n",
    # framing: Content-Length / Transfer-Encoding
    "cl-and-te": put(b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", b"3\r\nabc\r\n0\r\n\r\n"),
    "two-cls": put(b"Content-Length: 3\r\nContent-Length: 30\r\n", b"abc"),
    "cl-list": put(b"Content-Length: 3, 3\r\n", b"abc"),
    "negative-cl": put(b"Content-Length: -3\r\n", b"abc"),
    "hex-cl": put(b"Content-Length: 0x3\r\n", b"abc"),
    "huge-cl": put(b"Content-Length: 99999999999999999999999999\r\n", b"abc"),
    "te-gzip-chunked": put(b"Transfer-Encoding: gzip, chunked\r\n", b"3\r\nabc\r\n0\r\n\r\n"),
    "te-unknown": put(b"Transfer-Encoding: bogus\r\n", b"abc"),
    "te-chunked-twice": put(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                            b"3\r\nabc\r\n0\r\n\r\n"),
    "bad-chunk-size": put(b"Transfer-Encoding: chunked\r\n", b"zz\r\nabc\r\n0\r\n\r\n"),
    "huge-chunk-size": put(b"Transfer-Encoding: chunked\r\n", b"ffffffffffffffffffff\r\nabc\r\n0\r\n\r\n"),
    "chunk-longer-than-said": put(b"Transfer-Encoding: chunked\r\n", b"2\r\nabcdef\r\n0\r\n\r\n"),
    "encoded-body": put(b"Content-Length: 3\r\nContent-Encoding: gzip\r\n", b"abc"),
    # headers
    "oversized-header": put(b"X-Big: " + BIG + b"\r\nContent-Length: 3\r\n", b"abc"),
    "oversized-register-header": put(b"X-Check-Registers: " + BIG + b"\r\nContent-Length: 3\r\n", b"abc"),
    "many-headers": put(b"".join(b"X-H%d: v\r\n" % i for i in range(500)) + b"Content-Length: 3\r\n", b"abc"),
    "space-in-header-name": put(b"Bad Name: v\r\nContent-Length: 3\r\n", b"abc"),
    "nul-in-header": put(b"X-Check-Registers: a\x00b\r\nContent-Length: 3\r\n", b"abc"),
    "header-without-colon": put(b"NoColon\r\nContent-Length: 3\r\n", b"abc"),
    "obsolete-line-folding": put(b"X-Union-Registers: a=b,\r\n c=d\r\nContent-Length: 3\r\n", b"abc"),
    "non-utf8-register": put(b"X-Union-Registers: k=\xff\xfe\r\nContent-Length: 3\r\n", b"abc"),
    "bare-lf-lines": b"PUT " + PATH + b" HTTP/1.1\nHost: x\nContent-Length: 3\n\nabc",
    "bare-cr-in-header": put(b"X-A: b\rX-Union-Registers: a=b\r\nContent-Length: 3\r\n", b"abc"),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from herald.testing import BrokerProcess

    proc = BrokerProcess(tmp_path_factory.mktemp("raw")).start()
    seed_journal(proc, NAME)
    yield proc
    proc.kill()


def assert_refused_harmlessly(served, response, before) -> None:
    if response is not None:  # closing without an answer is fine for bytes that are not HTTP
        assert 400 <= response.status < 500, (response.status, response.body[:300])
        assert b"Traceback" not in response.body
    assert served.proc.poll() is None, "the broker died"
    assert journals_state(served.url) == before
    logged = "".join(served.stderr_lines)
    assert "Traceback" not in logged and " ERROR " not in logged, logged[-3000:]


@pytest.mark.parametrize("case", CASES)
def test_malformed_requests_are_refused_and_change_nothing(served, case):
    before = journals_state(served.url)
    assert_refused_harmlessly(served, exchange(served.url, CASES[case]), before)


@pytest.mark.parametrize("framing, declared, sent", [
    (b"Content-Length: 1000\r\n", b"", b"x" * 10),
    (b"Content-Length: 1000\r\n", b"", b"x" * 999),
    (b"Transfer-Encoding: chunked\r\n", b"", b"3e8\r\n" + b"x" * 500),
    (b"Transfer-Encoding: chunked\r\n", b"", b"3\r\nabc\r\n"),  # no last chunk
])
def test_a_truncated_put_body_appends_nothing(served, framing, declared, sent):
    before = journals_state(served.url)
    with connect(served.url) as sock:
        sock.sendall(put(framing + declared) + sent)
        sock.shutdown(socket.SHUT_WR)  # the client's body ends here
        response = parse(read_until_closed(sock))
    assert_refused_harmlessly(served, response, before)
    # The next append lands exactly at the old write head: nothing of the cut one remains.
    with served.client() as http:
        commit = http.put(f"/{NAME}", content=b"next\n")
        assert commit.headers["X-Commit-Begin"] == before[NAME][2]
        assert http.get(f"/{NAME}").content == before[NAME][1] + b"next\n"


def test_a_client_gone_mid_body_appends_nothing(served):
    before = journals_state(served.url)
    sock = connect(served.url)
    sock.sendall(put(b"Content-Length: 100000\r\n") + b"x" * 5000)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()  # SO_LINGER 0: a reset, as a crashed client would leave
    with served.client() as http:
        assert http.put(f"/{NAME}", content=b"after\n").headers["X-Commit-Begin"] == before[NAME][2]
        assert http.get(f"/{NAME}").content == before[NAME][1] + b"after\n"
    assert served.proc.poll() is None


def test_pipelined_requests_after_a_bad_one_are_not_executed(served):
    """A smuggling shape: a bad request followed by a valid PUT on one connection."""
    before = journals_state(served.url)
    smuggled = put(b"Content-Length: 6\r\n", b"evil!\n")
    response = exchange(served.url, put(b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
                                        b"0\r\n\r\n") + smuggled)
    assert_refused_harmlessly(served, response, before)

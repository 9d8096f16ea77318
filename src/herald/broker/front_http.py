"""HTTP/1.1 for the append fast path: request heads parsed by httptools, answers as bytes.

`herald.broker.front` serves the commonest request — a plain ``PUT /<journal>``
with a ``Content-Length`` — without aiohttp's per-request machinery (request
object, middlewares, router, response writer: most of an append's CPU). This
module is its protocol half, free of sockets (h11's model): `parse_put_head`
turns one request head into a `PutHead`, or None when the request is anything
else, which then goes to aiohttp untouched; `commit_answer` and `error_answer`
build the exact bytes aiohttp's gateway sends for the same outcome, header for
header (tests/broker/test_front.py compares the two).

    head = parse_put_head(raw_head, limits)
    if head is not None:
        ...  # append head.content_length bytes to head.journal_name, then
        transport.write(commit_answer(result, head.close))
"""

from __future__ import annotations

import http
import time
from dataclasses import dataclass
from urllib.parse import unquote

import httptools
import orjson
from aiohttp.http import SERVER_SOFTWARE

from herald.broker.group import AppendCommit
from herald.protocol.errors import HeraldError
from herald.protocol.journal import validate_journal_name

__all__ = ["HeadLimits", "PutHead", "commit_answer", "error_answer", "parse_put_head"]

#: Headers whose mere presence sends a request to aiohttp: each asks for something
#: only the full gateway does (register checks, a proxied or continued request,
#: an encoded body, a protocol switch) or that aiohttp answers itself.
HANDED_OFF_HEADERS = frozenset({
    b"transfer-encoding", b"content-encoding", b"expect", b"upgrade", b"x-check-registers",
    b"x-union-registers", b"x-subtract-registers", b"x-herald-proxied", b"x-herald-route-revision",
})
#: Headers aiohttp refuses to see twice (a duplicate is a 400 there).
SINGLE_HEADERS = frozenset({b"host", b"content-length", b"connection"})


@dataclass(frozen=True, slots=True)
class HeadLimits:
    """What aiohttp would refuse, so that such heads go to it: the longest line or
    field, the most header fields, the largest append."""

    max_header_bytes: int
    max_headers: int
    max_append_bytes: int


@dataclass(frozen=True, slots=True)
class PutHead:
    """A plain append's head: the journal, the body's length, and whether the
    client asked to close the connection after the answer."""

    journal_name: str
    content_length: int
    close: bool


class _HeadParser:
    """httptools callbacks collecting one head (llhttp validates the syntax)."""

    __slots__ = ("complete", "fields", "url")

    def __init__(self) -> None:
        self.url = b""
        self.fields: list[tuple[bytes, bytes]] = []
        self.complete = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.complete = True


def parse_put_head(head: bytes, limits: HeadLimits) -> PutHead | None:
    """``head`` (request line to the blank line, inclusive) as a plain append, or
    None for anything else: another method, HTTP/1.0, a query, a header that asks
    for more (`HANDED_OFF_HEADERS`), a duplicate, a size aiohttp would refuse, a
    name the gateway would refuse, or a head llhttp cannot parse. None is never an
    answer: the caller hands the request to aiohttp, which gives its usual one."""
    if len(head) > limits.max_header_bytes or head.count(b"\n") != head.count(b"\r\n"):
        return None
    collected = _HeadParser()
    parser = httptools.HttpRequestParser(collected)
    try:
        parser.feed_data(head)
    except httptools.HttpParserError:
        return None
    if (not collected.complete or parser.get_method() != b"PUT" or parser.get_http_version() != "1.1"
            or len(collected.fields) > limits.max_headers):
        return None
    return _plain_append(collected, limits)


def _plain_append(collected: _HeadParser, limits: HeadLimits) -> PutHead | None:
    url = collected.url
    if not url.startswith(b"/") or b"?" in url or b"#" in url:
        return None
    seen: dict[bytes, bytes] = {}
    for name, value in collected.fields:
        if name in HANDED_OFF_HEADERS or (name in SINGLE_HEADERS and name in seen):
            return None
        seen[name] = value
    raw_length = seen.get(b"content-length")
    if b"host" not in seen or raw_length is None or not raw_length.isdigit() or len(raw_length) > 19:
        return None
    content_length = int(raw_length)
    connection = seen.get(b"connection", b"keep-alive").strip().lower()
    if content_length > limits.max_append_bytes or connection not in (b"keep-alive", b"close"):
        return None
    name = _journal_name(url)
    return None if name is None else PutHead(name, content_length, connection == b"close")


def _journal_name(url: bytes) -> str | None:
    """The journal a path names, as the gateway decodes it; None if it would refuse it."""
    try:
        name = unquote(url[1:].decode("ascii"))
        validate_journal_name(name, field="journal")
    except (UnicodeDecodeError, HeraldError):
        return None
    return name


# -- answers -----------------------------------------------------------------------------


class _Date:
    """The ``Date`` header line, rebuilt once a second (as aiohttp caches it)."""

    __slots__ = ("_line", "_second")

    def __init__(self) -> None:
        self._second, self._line = -1, b""

    def line(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            stamp = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now))
            self._line = f"Date: {stamp}\r\n".encode()
        return self._line


_date = _Date()
_SERVER = f"Server: {SERVER_SOFTWARE}\r\n".encode()
_CLOSE = b"Connection: close\r\n"


def _tail(close: bool) -> bytes:
    """The headers aiohttp adds last (``Date``, ``Server``, ``Connection``) and the blank line."""
    return _date.line() + _SERVER + (_CLOSE if close else b"") + b"\r\n"


def commit_answer(result: AppendCommit, close: bool) -> bytes:
    """The gateway's 204 for an acknowledged append (`gateway.commit_headers`)."""
    return (b"HTTP/1.1 204 No Content\r\nX-Commit-Begin: %d\r\nX-Commit-End: %d\r\n"
            b"X-Commit-SHA1-Sum: %s\r\nX-Write-Head: %d\r\nX-Registers: %s\r\n"
            % (result.begin, result.end, result.sha1_hex.encode(), result.write_head,
               str(result.registers).encode())) + _tail(close)


def error_answer(err: HeraldError, close: bool) -> bytes:
    """The gateway's JSON error (`herald.broker.server.error_response`), as bytes."""
    body = orjson.dumps(err.to_dict(), default=str)
    code = err.http_code
    try:
        reason = http.HTTPStatus(code).phrase
    except ValueError:
        reason = ""
    lines = [f"HTTP/1.1 {code} {reason}\r\n".encode()]
    extra = err.extra or {}
    for key, header in (("write_head", "X-Write-Head"), ("registers", "X-Registers")):
        if extra.get(key) is not None:
            lines.append(f"{header}: {extra[key]}\r\n".encode())
    lines.append(b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body))
    lines.append(_tail(close))
    lines.append(body)
    return b"".join(lines)

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
from herald.protocol.labels import LabelSet

__all__ = ["HeadLimits", "KnownHeads", "PutHead", "commit_answer", "error_answer", "parse_put_head"]

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


class KnownHeads:
    """`parse_put_head` with a memory of the heads it parsed last.

    A writer sends the same head with every append (same journal, host, length,
    headers), and parsing one — llhttp, then the header checks, the name's
    decoding and validation — was a tenth of the broker's CPU per 1 KiB append.
    The outcome is a pure function of the head's bytes and the limits, so a head
    seen before is looked up instead. Bounded: at most `MAX_HEADS` heads of at
    most `MAX_HEAD_BYTES` each are kept (all forgotten when full), so hostile
    heads cost memory no more than briefly.

        heads = KnownHeads(limits)
        head = heads.parse(raw_head)   # as parse_put_head(raw_head, limits)
    """

    MAX_HEADS = 256
    MAX_HEAD_BYTES = 1 << 10

    def __init__(self, limits: HeadLimits) -> None:
        self.limits = limits
        self._known: dict[bytes, PutHead | None] = {}

    def parse(self, head: bytes) -> PutHead | None:
        known = self._known
        try:
            return known[head]
        except KeyError:
            pass
        parsed = parse_put_head(head, self.limits)
        if len(head) <= self.MAX_HEAD_BYTES:
            if len(known) >= self.MAX_HEADS:
                known.clear()
            known[head] = parsed
        return parsed


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


_SERVER = f"Server: {SERVER_SOFTWARE}\r\n".encode()
_CLOSE = b"Connection: close\r\n"


class _Tails:
    """The headers aiohttp adds last (``Date``, ``Server``, ``Connection``) and the
    blank line, rebuilt once a second (as aiohttp caches ``Date``)."""

    __slots__ = ("_second", "_tails")

    def __init__(self) -> None:
        self._second, self._tails = -1, (b"", b"")

    def tail(self, close: bool) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            stamp = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now))
            head = f"Date: {stamp}\r\n".encode() + _SERVER
            self._tails = (head + b"\r\n", head + _CLOSE + b"\r\n")
        return self._tails[close]


_tail = _Tails().tail


class _RegistersText:
    """``X-Registers``' value, kept for the last registers seen: every append of a
    group (and of every group until registers change) answers the same labels.
    Compared by their ``labels`` tuple, not the `LabelSet`: each journal holds its
    own empty set, but they share the one empty tuple, so groups of many journals
    taking turns do not rebuild the text each time."""

    __slots__ = ("_labels", "_text")

    def __init__(self) -> None:
        self._labels: tuple | None = None
        self._text = b""

    def of(self, registers: LabelSet) -> bytes:
        if registers.labels is not self._labels:
            self._labels, self._text = registers.labels, str(registers).encode()
        return self._text


_registers_text = _RegistersText()


def commit_answer(result: AppendCommit, close: bool) -> bytes:
    """The gateway's 204 for an acknowledged append (`gateway.commit_headers`)."""
    return (b"HTTP/1.1 204 No Content\r\nX-Commit-Begin: %d\r\nX-Commit-End: %d\r\n"
            b"X-Commit-SHA1-Sum: %s\r\nX-Write-Head: %d\r\nX-Registers: %s\r\n%s"
            % (result.begin, result.end, result.sha1_hex.encode(), result.write_head,
               _registers_text.of(result.registers), _tail(close)))


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

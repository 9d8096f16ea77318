"""One journal's replication stream to one peer: groups go out as frames of one long
request body, and the peer's answers come back, in order, as lines of its response.

A request per group cost each replica an HTTP request's parsing, four middlewares,
a peer token's verification and a route lookup, and the primary an aiohttp client
request: some 1-1.5 ms of CPU per group on every replica, with three brokers on two
cores. On a stream those are paid once, at open; a group costs a frame header and
one answer line.

    POST /v1/replicate/stream?journal=J          (peer token, X-Herald-Primary)
    body:     {"begin":B,"fragment_begin":F,"length":N,"registers":"…"}\\n <N bytes>  …
    response: {"sum":"<fragment SHA1>"}\\n  …  or, once, {"error":{status,message,…}}\\n

The peer applies frames one after another, so a stream's groups commit in the order
sent; it answers a frame only after the group is durable there [I-APPEND-3]. The
first error ends the stream (every later frame was cut after the failed one) and
fails every group still waiting for an answer; the primary rolls back and re-syncs
(`herald.broker.primary_pipeline`). A stream idle for `IDLE_CLOSE_S` ends, so an
idle journal holds no connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections import deque
from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

import aiohttp
import httptools
import orjson

from herald.broker.metrics import METRICS
from herald.broker.wire import json_object
from herald.protocol.errors import HeraldError, Status, ValidationError
from herald.protocol.labels import LabelSet

log = logging.getLogger(__name__)

__all__ = ["IDLE_CLOSE_S", "MAX_HEAD_BYTES", "PeerStream", "answer_line", "error_line", "frame_head", "parse_answer"]

STREAM_PATH = "/v1/replicate/stream"
#: A stream with no group waiting for this long is ended (it reopens at the next group).
IDLE_CLOSE_S = 2.0
#: A frame header longer than this is refused (registers are bounded far below it).
MAX_HEAD_BYTES = 64 << 10
CONNECT_TIMEOUT_S = 10.0


def frame_head(begin: int, fragment_begin: int, length: int, registers: LabelSet) -> bytes:
    """The header line of one group's frame; its ``length`` bytes follow."""
    return orjson.dumps({"begin": begin, "fragment_begin": fragment_begin, "length": length,
                         "registers": str(registers)}) + b"\n"


def answer_line(fragment_sum: str) -> bytes:
    return b'{"sum":"' + fragment_sum.encode() + b'"}\n'


def error_line(err: HeraldError) -> bytes:
    return orjson.dumps({"error": err.to_dict()}) + b"\n"


def parse_answer(line: bytes) -> str:
    """The fragment SHA1 one answer line carries; raises the peer's error."""
    doc = orjson.loads(line)
    if not isinstance(doc, dict):
        raise ValueError(f"not an answer: {line[:80]!r}")
    if isinstance(doc.get("sum"), str):
        return doc["sum"]
    if isinstance(doc.get("error"), dict):
        raise HeraldError.from_dict(doc["error"])
    raise ValueError(f"not an answer: {line[:80]!r}")


class PeerStream:
    """The primary's end of one stream. `send` is synchronous (frames keep the order
    of the calls), and may be called before the connection is open: frames wait in
    a list (at most the pipeline's depth, `herald.broker.primary_pipeline`).

    A plain ``asyncio`` connection, not an aiohttp request: a frame is one
    ``writelines`` of its chunk, and answers are parsed (httptools) and handed to
    their futures in ``data_received``. Through aiohttp, each frame woke the
    request body's generator task and each answer the task reading lines, per
    peer: two loop hand-offs and aiohttp's writer and reader per group and peer.
    The transport's buffer holds at most the pipeline's frames in flight, so no
    other back-pressure is needed.
    """

    def __init__(self, peer: str, journal: str, headers: dict[str, str],
                 on_failure: Callable[[HeraldError], None], tls: ssl.SSLContext | None = None):
        self.peer, self.journal, self.headers = peer, journal, headers
        self.credentials: dict[str, str] = {}  # the token it was opened with (the pipeline's)
        self._on_failure = on_failure
        self._seconds = METRICS.replication_seconds.labels(peer)  # labels() locks and builds a key
        self._waiting: deque[tuple[asyncio.Future[str], float]] = deque()
        self._unsent: list[bytes] = []  # chunks sent before the connection opened
        self._transport: asyncio.Transport | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._ending = False  # the body's last chunk is sent (or due at open)
        self._over = False  # the connection ended (or never opened)
        self.closed = False  # takes no more frames (a pipeline opens another stream)
        self._opening = asyncio.ensure_future(self._open(tls))

    def send(self, frame: bytes) -> asyncio.Future[str]:
        """Send one frame (`frame_head` and the group's bytes); its future is the
        peer's fragment SHA1 once the group is durable there."""
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        if self.closed:
            answer.set_exception(self._failure("the stream is closed"))
            return answer
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        self._waiting.append((answer, time.perf_counter()))
        chunk = [b"%x\r\n" % len(frame), frame, b"\r\n"]
        if self._transport is not None:
            self._transport.writelines(chunk)
        else:
            self._unsent.extend(chunk)
        return answer

    def close(self, graceful: bool = False) -> None:
        """End the stream: ``graceful`` lets the peer answer every frame sent (the
        body just ends); otherwise the connection is dropped and unanswered frames
        fail. Idempotent."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        if graceful and not self._over:
            self.closed = True
            if not self._ending:
                self._ending = True
                if self._transport is not None:
                    self._transport.write(b"0\r\n\r\n")
            return
        self._end(self._failure("the stream was closed"))

    async def _open(self, tls: ssl.SSLContext | None) -> None:
        url = urlsplit(self.peer)
        secure = url.scheme == "https"
        try:
            host, port = url.hostname or "", url.port or (443 if secure else 80)
            head = _request_head(url.netloc, self.journal, self.headers)
            context = (tls or ssl.create_default_context()) if secure else None
            transport, _ = await asyncio.wait_for(asyncio.get_running_loop().create_connection(
                lambda: _Answers(self), host, port, ssl=context), CONNECT_TIMEOUT_S)
        except (OSError, ValueError, TimeoutError) as err:
            self._end(self._failure(str(err) or type(err).__name__))
            return
        if self._over:
            transport.abort()
            return
        self._transport = transport  # type: ignore[assignment]
        transport.writelines([head, *self._unsent, *([b"0\r\n\r\n"] if self._ending else [])])
        self._unsent.clear()

    def _answered(self, line: bytes) -> None:
        """One answer line, for the oldest frame not answered yet."""
        if not self._waiting:
            raise ValueError(f"an answer to no frame: {line[:80]!r}")
        answer, sent = self._waiting.popleft()
        try:
            fragment_sum = parse_answer(line)
        except (HeraldError, ValueError):
            self._waiting.appendleft((answer, sent))
            raise
        self._seconds.observe(time.perf_counter() - sent)
        if not answer.done():
            answer.set_result(fragment_sum)
        if not self._waiting and not self.closed:
            self._idle = asyncio.get_running_loop().call_later(IDLE_CLOSE_S, self.close, True)

    def _end(self, error: HeraldError) -> None:
        """The stream is over (dropped, refused, failed or done): fail what is unanswered."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        self.closed = self._over = True
        self._opening.cancel()
        if self._transport is not None:
            self._transport.abort()  # nothing half-read is reused
        self._unsent.clear()
        if self._waiting:
            METRICS.replication_failures.labels(self.peer).inc()
            self._on_failure(error)
            while self._waiting:
                answer, _ = self._waiting.popleft()
                if not answer.done():
                    answer.set_exception(error)

    def _failure(self, why: str) -> HeraldError:
        return HeraldError(Status.INSUFFICIENT_JOURNAL_BROKERS,
                           f"replica {self.peer} of {self.journal} failed: {why}")


def _request_head(netloc: str, journal: str, headers: dict[str, str]) -> bytes:
    """The stream request's head: a chunked POST carrying the peer headers."""
    lines = [f"POST {STREAM_PATH}?{urlencode({'journal': journal})} HTTP/1.1", f"Host: {netloc}",
             "Content-Type: application/octet-stream", "Transfer-Encoding: chunked"]
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0") or ":" in name:
            raise ValueError(f"a peer header cannot carry {name!r}")
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Answers(asyncio.Protocol):
    """The stream's response, read as it comes: a 200 whose body is answer lines
    (each handed to `PeerStream._answered` at once), or an error document."""

    def __init__(self, stream: PeerStream):
        self._stream = stream
        self._parser = httptools.HttpResponseParser(self)
        self._status = 0
        self._partial = b""  # an answer line not complete yet (or an error body)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as err:  # a callback's own error is its __context__
            cause = err.__context__ if isinstance(err.__context__, (HeraldError, ValueError)) else err
            self._stream._end(cause if isinstance(cause, HeraldError) else self._stream._failure(str(cause)))

    def connection_lost(self, exc: Exception | None) -> None:
        self._stream._end(self._stream._failure(str(exc) if exc else "the stream ended early"))

    # httptools callbacks (an exception raised here ends the stream, in data_received)
    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        data = self._partial + body if self._partial else body
        if self._status != 200:  # an error document: kept whole (bounded) until the end
            if len(data) > MAX_HEAD_BYTES:
                raise ValueError(f"an error answer longer than {MAX_HEAD_BYTES} bytes")
            self._partial = data
            return
        start = 0
        while (newline := data.find(b"\n", start)) >= 0 and not self._stream._over:
            self._stream._answered(data[start:newline + 1])
            start = newline + 1
        self._partial = data[start:]
        if len(self._partial) > MAX_HEAD_BYTES:
            raise ValueError(f"an answer line longer than {MAX_HEAD_BYTES} bytes")

    def on_message_complete(self) -> None:
        if self._status != 200:
            raise HeraldError.from_dict(orjson.loads(self._partial))
        if self._partial:
            raise ValueError(f"the stream ended inside an answer: {self._partial[:80]!r}")
        self._stream._end(self._stream._failure("the stream ended early"))  # fails only frames unanswered


async def read_frame(body: aiohttp.StreamReader, parse_head: Callable[[dict], tuple]) -> tuple | None:
    """The next frame of a stream body: ``parse_head(header) + (content,)``, or None
    at the body's end. A malformed frame raises ValidationError naming its field."""
    try:
        line = await body.readline()
    except ValueError:  # aiohttp: a line past its buffer limit
        raise ValidationError("body", f"a frame header is longer than {MAX_HEAD_BYTES} bytes") from None
    if not line:
        return None
    if len(line) > MAX_HEAD_BYTES or not line.endswith(b"\n"):
        raise ValidationError("body", "a frame header must be one line of at most "
                              f"{MAX_HEAD_BYTES} bytes, ending in a newline")
    fields = parse_head(json_object(line, "a frame header:"))
    length = fields[-1]
    with contextlib.suppress(asyncio.IncompleteReadError):
        return (*fields[:-1], await body.readexactly(length))
    raise ValidationError("body", f"the stream ended inside a frame of {length} bytes")

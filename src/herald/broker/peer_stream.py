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
import time
from collections import deque
from collections.abc import AsyncIterator, Callable

import aiohttp
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
_END = object()  # ends the request body: the stream closes gracefully


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
    of the calls), and may be called before the stream is open: frames wait in a
    queue bounded by the pipeline's depth (`herald.broker.primary_pipeline`)."""

    def __init__(self, session: aiohttp.ClientSession, peer: str, journal: str, headers: dict[str, str],
                 on_failure: Callable[[HeraldError], None]):
        self.peer, self.journal, self.headers = peer, journal, headers
        self.credentials: dict[str, str] = {}  # the token it was opened with (the pipeline's)
        self._on_failure = on_failure
        self._frames: asyncio.Queue[object] = asyncio.Queue()
        self._waiting: deque[tuple[asyncio.Future[str], float]] = deque()
        self._idle: asyncio.TimerHandle | None = None
        self._response: aiohttp.ClientResponse | None = None
        self.closed = False
        self._task = asyncio.ensure_future(self._run(session))

    def send(self, frame: bytes) -> asyncio.Future[str]:
        """Queue one frame (`frame_head` and the group's bytes); its future is the
        peer's fragment SHA1 once the group is durable there."""
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        if self.closed:
            answer.set_exception(self._failure("the stream is closed"))
            return answer
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        self._waiting.append((answer, time.perf_counter()))
        self._frames.put_nowait(frame)
        return answer

    def close(self, graceful: bool = False) -> None:
        """End the stream: ``graceful`` lets the peer answer every frame sent (the
        body just ends); otherwise the connection is dropped and unanswered frames
        fail. Idempotent."""
        if self.closed:
            return
        self.closed = True
        if self._idle is not None:
            self._idle.cancel()
        if graceful:
            self._frames.put_nowait(_END)
        else:
            self._task.cancel()
            if self._waiting:  # now: a task cancelled before it ran has no finally
                self._fail_waiting(self._failure("the stream was closed"))

    async def _run(self, session: aiohttp.ClientSession) -> None:
        error: HeraldError | None = None
        try:
            self._response = await session.post(
                f"{self.peer}{STREAM_PATH}", params={"journal": self.journal}, headers=self.headers,
                data=self._body(), timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0))
            if self._response.status != 200:
                raise HeraldError.from_dict(orjson.loads(await self._response.read()))
            await self._read_answers(self._response.content)
        except HeraldError as err:
            error = err
        except asyncio.CancelledError:
            error = self._failure("the stream was closed")
        except (aiohttp.ClientError, OSError, ValueError, RuntimeError, asyncio.IncompleteReadError) as err:
            error = self._failure(str(err) or type(err).__name__)
        finally:
            self.closed = True
            if self._response is not None:
                self._response.close()  # drops the connection: nothing half-read is reused
            if self._waiting:
                self._fail_waiting(error or self._failure("the stream ended early"))

    async def _body(self) -> AsyncIterator[bytes]:
        while (frame := await self._frames.get()) is not _END:
            yield frame  # type: ignore[misc]

    async def _read_answers(self, content: aiohttp.StreamReader) -> None:
        while line := await content.readline():
            if not self._waiting:
                raise ValueError(f"an answer to no frame: {line[:80]!r}")
            answer, sent = self._waiting.popleft()
            try:
                fragment_sum = parse_answer(line)
            except HeraldError as err:
                self._waiting.appendleft((answer, sent))
                raise err from None
            METRICS.replication_seconds.labels(self.peer).observe(time.perf_counter() - sent)
            if not answer.done():
                answer.set_result(fragment_sum)
            if not self._waiting and not self.closed:
                self._idle = asyncio.get_running_loop().call_later(IDLE_CLOSE_S, self.close, True)

    def _fail_waiting(self, error: HeraldError) -> None:
        METRICS.replication_failures.labels(self.peer).inc()
        self._on_failure(error)
        while self._waiting:
            answer, _ = self._waiting.popleft()
            if not answer.done():
                answer.set_exception(error)

    def _failure(self, why: str) -> HeraldError:
        return HeraldError(Status.INSUFFICIENT_JOURNAL_BROKERS,
                           f"replica {self.peer} of {self.journal} failed: {why}")


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

"""The broker's listener: plain appends on a lean protocol, every other request on aiohttp.

Most of what a broker serves is ``PUT /<journal>`` with a small body, and under
aiohttp most of an append's CPU went to the framework (request object, four
middlewares, router, response writer), not to the append. Each connection
therefore starts on a `FrontConnection` (an ``asyncio.Protocol``): it frames the
request itself (head up to the blank line, then ``Content-Length`` bytes), lets
httptools (llhttp) parse the head (`herald.broker.front_http`), and when the
request is a plain append to a journal this broker is primary of, appends it and
writes the gateway's exact answer. Anything else — another method or path, a
header the full gateway must see, auth, a rate-limited journal, a head llhttp
refuses — hands the connection, with every byte received so far, to aiohttp's
own handler, which serves it (and the rest of the connection) as before. A
hand-off never answers anything itself, so every refusal keeps its bytes. A
large body to an idle journal is written into its spool as it arrives rather
than buffered (`herald.broker.append_stream`).

    site = FrontSite(runner, sock, broker)   # instead of web.SockSite (plain TCP only)
    await site.start()

The guarantees are the gateway's: an append is answered only after it is durable
[I-APPEND-3]; a connection lost mid-body appends nothing [I-APPEND-2]; one request
at a time per connection, answers in order; a connection idle past
``idle_timeout_s`` is closed, and a body late past ``body_timeout_s`` is handed to
aiohttp, which answers 408 [I-RESTART-1]. A client that stops reading its answers
stops being read (back-pressure, no unbounded buffer).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from aiohttp import web

from herald.broker.append_stream import STREAM_MIN_BYTES, StreamedAppend
from herald.broker.front_http import HeadLimits, KnownHeads, PutHead, commit_answer, error_answer
from herald.broker.group import AppendCommit
from herald.broker.journal import Journal
from herald.broker.limits import MAX_HEADER_FIELDS
from herald.broker.metrics import METRICS, count_request
from herald.protocol.errors import HeraldError, Status
from herald.protocol.journal import JournalFlags, JournalSpec

log = logging.getLogger(__name__)

__all__ = ["FrontConnection", "FrontSite", "Frontage"]

#: Bytes of pipelined requests held while an append is in flight before the
#: connection stops being read.
MAX_BUFFERED_BYTES = 256 << 10
_PUT = b"PUT /"
#: Paths that are never a plain append: the control and peer APIs' prefixes.
_NOT_JOURNALS = ("v1/", "debug/")
#: Journals whose fast-path eligibility is remembered (all forgotten when full).
MAX_REMEMBERED_SPECS = 4096
_INTERNAL = HeraldError(Status.INTERNAL, "internal error (logged by the broker)")
class Frontage:
    """What every connection of one listener shares: the broker, aiohttp's handler
    factory, the limits, and the open connections (swept for idle ones)."""

    def __init__(self, broker, aiohttp_server: Callable[[], asyncio.Protocol]) -> None:
        settings = broker.settings
        self.broker = broker
        self.aiohttp_server = aiohttp_server
        self.limits = HeadLimits(settings.max_header_bytes, MAX_HEADER_FIELDS, settings.max_append_bytes)
        self.heads = KnownHeads(self.limits)
        self.idle_timeout_s = settings.idle_timeout_s
        self.body_timeout_s = settings.body_timeout_s
        self.connections: set[FrontConnection] = set()
        self.loop = asyncio.get_running_loop()
        self._sweep_s = max(0.05, min(1.0, self.idle_timeout_s / 4, self.body_timeout_s / 4))
        self._sweeper = self.loop.call_later(self._sweep_s, self._sweep)
        self.handed_off = 0  # statistics: connections given to aiohttp
        self._plain_specs: dict[str, tuple[JournalSpec, bool]] = {}

    def protocol(self) -> FrontConnection:
        return FrontConnection(self)

    def journal_for(self, head: PutHead) -> Journal | None:
        """The journal a plain append goes to on the fast path, or None: the request
        then needs the full gateway (auth, proxying, a rate limit, an error)."""
        broker = self.broker
        if broker.auth_keys is not None or broker.stopping.is_set() or head.journal_name.startswith(_NOT_JOURNALS):
            return None
        journal = broker.local_journal(head.journal_name, need_primary=True)
        if journal is None:
            return None
        spec = journal.spec
        plain = self._plain_specs.get(spec.name)
        if plain is None or plain[0] is not spec:
            plain = self._plain_spec(spec)
        return journal if plain[1] else None

    def _plain_spec(self, spec: JournalSpec) -> tuple[JournalSpec, bool]:
        """Whether appends to a journal of ``spec`` may take the fast path (writable,
        no rate limit), remembered for that spec object: both follow from the spec
        alone, and applying a change replaces the frozen object (`Journal.update`)."""
        plain = (spec, JournalFlags.is_writable(spec.flags) and not self.broker.append_rates.rate_of(spec))
        if len(self._plain_specs) >= MAX_REMEMBERED_SPECS:
            self._plain_specs.clear()
        self._plain_specs[spec.name] = plain
        return plain

    def statistics(self) -> dict[str, int]:
        return {"connections": len(self.connections), "handed_off": self.handed_off}

    def close(self) -> None:
        """Stop sweeping; close idle connections, and the others once answered."""
        self._sweeper.cancel()
        for connection in list(self.connections):
            connection.close_when_idle()

    def _sweep(self) -> None:
        now = self.loop.time()
        for connection in list(self.connections):
            connection.enforce_deadlines(now)
        self._sweeper = self.loop.call_later(self._sweep_s, self._sweep)


class FrontConnection(asyncio.Protocol):
    """One client connection until (if ever) it is handed to aiohttp. Event-driven,
    no task: states are `head` None (reading a head) / set (reading its body) and
    `busy` (an append in flight; later bytes wait in `buffer`)."""

    def __init__(self, front: Frontage) -> None:
        self.front = front
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.head: PutHead | None = None
        self.journal: Journal | None = None
        self.raw_head = b""
        self.parts: list[bytes] = []
        self.body_size = 0
        self.stream: StreamedAppend | None = None  # a large body written as it arrives
        self.busy = False
        self.reading_paused = False
        self.writing_paused = False
        self.closing = False
        self.eof = False
        self.since = front.loop.time()  # idle since, or the head's arrival
        self.started = 0.0

    # -- asyncio callbacks ----------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.front.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        # A body cut short is dropped here: nothing of it was queued [I-APPEND-2].
        self.front.connections.discard(self)
        self.transport = None
        self.parts = []
        self._abandon_stream()

    def eof_received(self) -> bool:
        """The client is done sending: answer what it sent, then close."""
        self.eof = True
        return self.busy or bool(self.buffer)  # True keeps the transport open to answer

    def pause_writing(self) -> None:
        self.writing_paused = True
        self._pause_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._serve()

    def data_received(self, data: bytes) -> None:
        if self.head is not None and not self.busy:
            self._take_body(data)
            return
        self.buffer = self.buffer + data if self.buffer else data
        if self.busy or self.writing_paused:
            if len(self.buffer) > MAX_BUFFERED_BYTES:
                self._pause_reading()
            return
        self._serve()

    # -- requests ---------------------------------------------------------------------

    def _serve(self) -> None:
        """Start the next buffered request, if one is whole enough to decide on."""
        if self.busy or self.head is not None or self.writing_paused or self.transport is None:
            return
        self._resume_reading()
        buffer = self.buffer
        if not buffer:
            return
        if not buffer.startswith(_PUT):
            if len(buffer) >= len(_PUT) or not _PUT.startswith(buffer):
                self._hand_off(buffer)
            return
        end = buffer.find(b"\r\n\r\n")
        if end < 0:  # not whole yet, unless it is not CRLF-framed (aiohttp judges those)
            if len(buffer) > self.front.limits.max_header_bytes or buffer.count(b"\n") != buffer.count(b"\r\n"):
                self._hand_off(buffer)
            return
        raw_head = buffer[:end + 4]
        head = self.front.heads.parse(raw_head)
        journal = self.front.journal_for(head) if head is not None else None
        if head is None or journal is None:
            self._hand_off(buffer)
            return
        self.head, self.journal, self.raw_head = head, journal, raw_head
        self.buffer, self.since = b"", self.front.loop.time()
        if head.content_length >= STREAM_MIN_BYTES:  # idle journal: into the spool as it arrives
            self.stream = StreamedAppend.start(journal, head.content_length)
            if self.stream is not None:
                self.stream.on_yield = self._stream_yielded
        elif len(buffer) == end + 4 + head.content_length:  # the commonest: one request, whole
            self._append(buffer[end + 4:])
            return
        self._take_body(buffer[end + 4:])

    def _take_body(self, data: bytes) -> None:
        head = self.head
        assert head is not None
        need = head.content_length - self.body_size
        if len(data) > need:
            data, self.buffer = data[:need], data[need:]
        if data:
            if self.stream is not None:
                self.stream.write(data)
            else:
                self.parts.append(data)
            self.body_size += len(data)
        if self.body_size == head.content_length:
            if self.stream is not None:
                self.body_size = 0
                self._append_streamed(self.stream)
                return
            parts, self.parts, self.body_size = self.parts, [], 0
            self._append(parts[0] if len(parts) == 1 else b"".join(parts))

    def _append(self, body: bytes) -> None:
        journal = self.journal
        assert journal is not None
        self.busy, self.started = True, time.perf_counter()
        try:
            queued = journal.append_nowait(body, self._settle)
        except HeraldError as err:
            count_request("append", err.status.name)
            # Answered on the next loop turn: a long pipeline of refusals must not recurse via _serve.
            self.front.loop.call_soon(self._answer, error_answer(err, self._closes()))
            return
        if not queued:  # the first store is unhealthy: append() waits for it, boundedly
            asyncio.ensure_future(journal.append(body)).add_done_callback(self._appended)

    def _append_streamed(self, stream: StreamedAppend) -> None:
        self.busy = True
        self.started = time.perf_counter()
        stream.finish().add_done_callback(self._appended)

    def _stream_yielded(self, received: bytes) -> None:
        """The streaming body gave its journal back to appends queued behind it: the
        rest is buffered, and the whole body queued once it is here."""
        self.stream = None
        self.parts = [received] if received else []

    def _abandon_stream(self) -> None:
        """Drop a body still streaming: nothing of it is appended [I-APPEND-2]."""
        stream, self.stream = self.stream, None
        if stream is not None and not self.busy:
            stream.abandon()

    def _appended(self, future: asyncio.Future) -> None:  # a streamed body's, or one awaited
        try:
            outcome = future.result()
        except asyncio.CancelledError:
            count_request("append", "CANCELLED")
            self.closing = True
            self._answer(b"")
            return
        except BaseException as err:  # noqa: BLE001 - answered by _settle
            outcome = err
        self._settle(outcome)

    def _settle(self, outcome: AppendCommit | BaseException) -> None:
        """Answer the append in flight: called by the sync round that committed it, in
        its completion callback (`herald.broker.group.CalledAnswer`), or by `_appended`."""
        close = self._closes()
        if isinstance(outcome, AppendCommit):
            self._answer(commit_answer(outcome, close), self.started)
        elif isinstance(outcome, HeraldError):
            count_request("append", outcome.status.name)
            self._answer(error_answer(outcome, close))
        else:  # a bug: logged, answered as the gateway does
            count_request("append", Status.INTERNAL.name)
            log.error("internal error method=PUT path=/%s", self.head.journal_name if self.head else "?",
                      exc_info=outcome)
            self._answer(error_answer(_INTERNAL, close))

    def _closes(self) -> bool:
        return self.closing or (self.head is not None and self.head.close)

    def _answer(self, answer: bytes, acknowledged: float = 0.0) -> None:
        """Write ``answer``; ``acknowledged``: an append's start, counted once it is written."""
        close, transport = self._closes(), self.transport
        if transport is not None and answer:
            transport.write(answer)
        if acknowledged:
            count_request("append", "OK")
            METRICS.append_requests.observe(time.perf_counter() - acknowledged)
        self.head, self.journal, self.raw_head, self.busy, self.stream = None, None, b"", False, None
        self.since = self.front.loop.time()
        if transport is None:
            return
        if close:
            transport.close()
            return
        self._serve()
        if self.eof and self.transport is not None and not self.busy and self.head is None:
            self.transport.close()  # half-closed by the client, and nothing more to answer

    # -- deadlines, shutdown, hand-off -------------------------------------------------

    def enforce_deadlines(self, now: float) -> None:
        """Close a connection idle too long; hand a late body to aiohttp (a 408)."""
        if self.busy or self.transport is None:
            return
        if self.head is None and now - self.since > self.front.idle_timeout_s:
            self.transport.close()
        elif self.head is not None and now - self.since > self.front.body_timeout_s:
            if self.stream is not None:
                self._stream_timed_out()
                return
            parts, self.parts, self.body_size, self.head = self.parts, [], 0, None
            self._hand_off(self.raw_head + b"".join(parts) + self.buffer)

    def _stream_timed_out(self) -> None:
        """A streamed body late past ``body_timeout_s`` went to the spool, not to a buffer
        aiohttp could take: the gateway's 408 is answered here, nothing appended."""
        self._abandon_stream()
        timeout_s = self.front.body_timeout_s
        count_request("append", Status.REQUEST_TIMEOUT.name)
        self.closing = True
        self._answer(error_answer(HeraldError(
            Status.REQUEST_TIMEOUT, f"the request body did not arrive within {timeout_s:g}s", "body"), True))

    def close_when_idle(self) -> None:
        """At shutdown: close now unless an append is in flight (then once answered).
        A body still arriving is dropped; nothing of it was appended [I-APPEND-2]."""
        self.closing = True
        if not self.busy and self.transport is not None:
            self._abandon_stream()
            self.transport.close()

    def _hand_off(self, received: bytes) -> None:
        """Give the connection and every byte received so far to aiohttp's handler."""
        transport = self.transport
        assert transport is not None
        self.front.connections.discard(self)
        self.front.handed_off += 1
        self.transport, self.buffer = None, b""
        if self.reading_paused:
            transport.resume_reading()
        handler = self.front.aiohttp_server()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        if received:
            handler.data_received(received)
        if self.eof:
            handler.eof_received()

    def _pause_reading(self) -> None:
        if not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.reading_paused and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()


class FrontSite(web.SockSite):
    """aiohttp's ``SockSite`` with `FrontConnection` in front of its handlers (plain
    TCP: a TLS listener keeps aiohttp alone)."""

    def __init__(self, runner: web.BaseRunner, sock, broker, **kwargs) -> None:
        super().__init__(runner, sock, **kwargs)
        self._broker = broker
        self.front: Frontage | None = None

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site; SockSite.start would listen itself
        server = self._runner.server
        assert server is not None
        self.front = Frontage(self._broker, server)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self.front.protocol, sock=self._sock, backlog=self._backlog)

    async def stop(self) -> None:
        await super().stop()
        if self.front is not None:
            self.front.close()

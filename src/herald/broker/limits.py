"""Per-connection limits: what one client may hold of a broker, and for how long.

A broker serves many clients from one event loop, so no client may pin its memory
or a request slot indefinitely [I-RESTART-1]. Three limits, each a setting:

- ``max_header_bytes``: the longest request line or header field (aiohttp answers
  400 beyond it, and at most 128 header fields are read), so headers cost a
  connection at most ~1 MiB.
- ``idle_timeout_s``: a connection with no request in progress, *including one
  still sending its request line and headers* (slowloris), is closed after it.
  aiohttp starts this timer when the connection opens and restarts it after each
  response; it never fires while a handler runs (blocking reads, watches).
- ``body_timeout_s``: a request body must arrive within this long of its headers,
  whatever the endpoint. A client dribbling a body gets 408 REQUEST_TIMEOUT and the
  connection is closed; an append cut off this way writes nothing [I-APPEND-2].

    runner = web.AppRunner(app, **runner_limits(settings))
    app = web.Application(middlewares=[..., body_deadline_middleware])
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from herald.broker.settings import BrokerSettings
from herald.protocol.errors import HeraldError, Status

log = logging.getLogger(__name__)

#: How long a refused request's unread body is drained before the connection is
#: closed: long enough for the client to read the answer, short enough to bound it.
LINGER_S = 2.0
#: aiohttp's default number of header fields; with ``max_header_bytes`` it bounds
#: the memory one request's headers take.
MAX_HEADER_FIELDS = 128


class _MalformedRequests(logging.Filter):
    """A client's malformed request (bad request line, oversized or invalid header)
    is answered 400 by aiohttp and is the client's problem, not the broker's: one
    INFO line, no traceback. Anything else aiohttp logs keeps its level."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            reason = str(exc.message).strip().splitlines()[0] if exc.message else ""
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg, record.args = "malformed request refused code=%s reason=%r", (exc.code, reason)
            record.exc_info, record.exc_text = None, None
        return True


#: The logger aiohttp's connection handlers use (instead of ``aiohttp.server``).
http_log = logging.getLogger("herald.broker.http")
http_log.addFilter(_MalformedRequests())


class BodyTimeoutError(TimeoutError):
    """A request body did not arrive within ``body_timeout_s``. A ``TimeoutError``
    so aiohttp's lingering drain after the 408 also stops on it and closes."""


def runner_limits(settings: BrokerSettings) -> dict:
    """Keyword arguments for ``web.AppRunner`` (passed on to each connection's handler)."""
    return {"max_line_size": settings.max_header_bytes,
            "max_field_size": settings.max_header_bytes,
            "max_headers": MAX_HEADER_FIELDS,
            "keepalive_timeout": settings.idle_timeout_s,
            "lingering_time": LINGER_S,
            "logger": http_log}


def _expire_body(request: web.Request, timeout_s: float) -> None:
    """Fail the body's pending and future reads, unless it already arrived whole."""
    if not request.content.is_eof():
        log.info("request body timed out method=%s path=%s after=%.0fs remote=%s",
                 request.method, request.path, timeout_s, request.remote)
        request.content.set_exception(BodyTimeoutError())


@web.middleware
async def body_deadline_middleware(request: web.Request, handler):
    """Give every request body ``body_timeout_s`` to arrive, from when its headers did.

    One timer per request that has a body; the handler reading it sees
    ``BodyTimeoutError`` and the client a 408 on a closing connection.
    """
    timeout_s = request.app["broker"].settings.body_timeout_s
    if not request.body_exists or request.content.is_eof():  # no body, or all of it is here
        # Set, so that handlers' ``request.get`` finds it: aiohttp's Mapping.get raises
        # and catches a KeyError for a missing key, a measurable cost per append.
        request["body_deadline"] = None
        return await handler(request)
    deadline = request["body_deadline"] = BodyDeadline(request, timeout_s)
    try:
        return await handler(request)
    except BodyTimeoutError:
        raise HeraldError(Status.REQUEST_TIMEOUT,
                          f"the request body did not arrive within {timeout_s:g}s", "body") from None
    finally:
        deadline.cancel()


class BodyDeadline:
    """The timer of one request body; `extend` pushes it back by time the broker
    itself made the client wait (a journal's append rate limit), which is not the
    client being slow."""

    def __init__(self, request: web.Request, timeout_s: float) -> None:
        self._request, self._timeout_s = request, timeout_s
        self._loop = asyncio.get_running_loop()
        self._at = self._loop.time() + timeout_s
        self._timer = self._loop.call_at(self._at, _expire_body, request, timeout_s)

    def extend(self, seconds: float) -> None:
        self._timer.cancel()
        self._at += seconds
        self._timer = self._loop.call_at(self._at, _expire_body, self._request, self._timeout_s)

    def cancel(self) -> None:
        self._timer.cancel()

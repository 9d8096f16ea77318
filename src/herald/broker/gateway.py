"""The HTTP gateway of the seed tutorial: ``PUT``, ``GET`` and ``HEAD /<journal>``.

Headers follow Gazette's gateway (``X-Write-Head``, ``X-Commit-Begin/End/SHA1-Sum``,
``Content-Range``, ``X-Fragment-Name``, ``X-Fragment-Location``); registers ride on
``X-Check-Registers`` (a selector), ``X-Union-Registers`` and
``X-Subtract-Registers`` (label sets), and come back in ``X-Registers``.

This module holds the appends and the gateway's endpoint table; reads are in
`herald.broker.gateway_read`, request parsing and routing in
`herald.broker.gateway_request`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from herald.broker.endpoints import Endpoint, Param, add_endpoints
from herald.broker.gateway_read import handle_get, handle_head
from herald.broker.gateway_request import journal_name, reject_unknown_params, serving_journal
from herald.broker.group import AppendCommit
from herald.broker.journal import Journal
from herald.broker.metrics import METRICS
from herald.broker.service import Broker
from herald.protocol.errors import HeraldError, Status, ValidationError
from herald.protocol.journal import JournalFlags
from herald.protocol.labels import LabelSelector, LabelSet

log = logging.getLogger(__name__)


# -- appends ------------------------------------------------------------------------------


RegisterHeaders = tuple[LabelSelector | None, LabelSet | None, LabelSet | None]


def register_headers(headers) -> RegisterHeaders:
    """Parse the register headers of a PUT, naming the header on error."""
    def parse(name, parser):
        raw = headers.get(name)
        if raw is None:
            return None
        try:
            return parser(raw)
        except ValidationError as err:
            raise ValidationError(name, err.message) from None
    return (parse("X-Check-Registers", LabelSelector.parse),
            parse("X-Union-Registers", lambda raw: LabelSet.parse(raw).refuse_prefix()),
            parse("X-Subtract-Registers", lambda raw: LabelSet.parse(raw).refuse_prefix()))


async def read_body(request: web.Request, limit: int,
                    pace: Callable[[int], Awaitable[None]] | None = None) -> bytes:
    """The whole request body, or PAYLOAD_TOO_LARGE before buffering past ``limit``.

    ``pace(size)`` is awaited after each chunk, before the next is read: a journal's
    rate limit holds the client back through TCP rather than buffering its body.
    """
    if request.content_length is not None and request.content_length > limit:
        raise HeraldError(Status.PAYLOAD_TOO_LARGE,
                          f"append of {request.content_length} bytes exceeds the limit of {limit}",
                          "body")
    if request.content.is_eof():
        # The whole body arrived with the headers (every small append): one read, no
        # per-chunk iteration.
        body = request.content.read_nowait()
        if len(body) > limit:
            raise HeraldError(Status.PAYLOAD_TOO_LARGE, f"append exceeds the limit of {limit} bytes", "body")
        if pace is not None:
            await pace(len(body))
        return body
    parts, size = [], 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise HeraldError(Status.PAYLOAD_TOO_LARGE, f"append exceeds the limit of {limit} bytes",
                              "body")
        parts.append(chunk)
        if pace is not None:
            await pace(len(chunk))
    return b"".join(parts)


def writable(journal: Journal) -> Journal:
    if not JournalFlags.is_writable(journal.spec.flags):
        raise HeraldError(Status.NOT_ALLOWED, f"journal {journal.spec.name} is not writable", "journal")
    return journal


async def append_from_request(broker: Broker, request: web.Request, journal: Journal,
                              registers: RegisterHeaders | None = None) -> AppendCommit:
    """Validate everything, then read the body, then append: bad input writes nothing.
    ``registers``: the request's register headers, if the caller parsed them already."""
    writable(journal)
    check, union, subtract = registers or register_headers(request.headers)
    deadline = request.get("body_deadline")

    async def pace(size: int) -> None:
        wait_s = broker.append_rates.delay(journal.spec, size)
        if not wait_s:  # no limit, or within it: no timer, no clock
            return
        started = time.monotonic()
        await asyncio.sleep(wait_s)  # the limit itself: time is what is rationed
        if deadline is not None:  # our rate limit's wait is not the client being slow
            deadline.extend(time.monotonic() - started)

    content = await read_body(request, broker.settings.max_append_bytes, pace=pace)
    started = time.perf_counter()
    result = await journal.append(content, check, union, subtract)
    METRICS.append_requests.observe(time.perf_counter() - started)
    return result


def commit_headers(result: AppendCommit) -> dict[str, str]:
    return {
        "X-Commit-Begin": str(result.begin),
        "X-Commit-End": str(result.end),
        "X-Commit-SHA1-Sum": result.sha1_hex,
        "X-Write-Head": str(result.write_head),
        "X-Registers": str(result.registers),
    }


async def handle_put(request: web.Request) -> web.Response:
    """Append the request body to the journal, whole or not at all.

    Register headers are checked before the body is read; a refused append writes nothing.
    """
    broker: Broker = request.app["broker"]
    name = journal_name(request)
    reject_unknown_params(request, set())
    registers = register_headers(request.headers)  # bad headers are a 400 here, before any proxying
    journal = await serving_journal(request, name, need_primary=True)
    result = await append_from_request(broker, request, journal, registers)
    return web.Response(status=204, headers=commit_headers(result))


APPEND_HEADERS = (
    Param("Content-Encoding", "Only `identity`: encoded bodies are refused (415).", enum=("identity",)),
    Param("X-Check-Registers", "Append only if the journal's registers match this selector (else 412)."),
    Param("X-Union-Registers", "Labels added to the registers with the append."),
    Param("X-Subtract-Registers", "Labels removed from the registers with the append."),
)
READ_QUERY = (
    Param("offset", "Where to read from; -1 = the write head.", int, minimum=-1),
    Param("block", "Wait for content to be committed, and stream it as it is.", bool),
    Param("end_offset", "Stop before this offset; 0 = no end.", int, minimum=0),
)
READ_REQUEST_HEADERS = (
    Param("Accept-Encoding", "`x-snappy-framed`: a non-blocking read held whole in local SNAPPY fragments may come "
                             "as their stored chunks (see the X-Encoded-* headers); otherwise ignored."),
)
READ_HEADERS = (
    Param("Content-Range", "`bytes <start>-<max>/<max>`: start moves past a pruned range."),
    Param("X-Write-Head", "The journal's write head.", int),
    Param("X-Fragment-Name", "The fragment holding the first offset."),
    Param("X-Fragment-Location", "A signed URL of that fragment, once persisted."),
    Param("Content-Encoding", "`x-snappy-framed` when the body is stored SNAPPY chunks (asked by Accept-Encoding)."),
    Param("X-Encoded-Begin", "With Content-Encoding: the offset of the body's first decoded byte.", int),
    Param("X-Encoded-End", "With Content-Encoding: where the read's content ends (decode, then trim).", int),
)
COMMIT_HEADERS = (
    Param("X-Commit-Begin", "First offset of the append.", int),
    Param("X-Commit-End", "Offset after the append.", int),
    Param("X-Commit-SHA1-Sum", "SHA1 of the appended bytes, hex."),
    Param("X-Write-Head", "The journal's write head.", int),
    Param("X-Registers", "The registers after the append, as `k=v,k2=v2`."),
)
# ``[\s\S]+``, not ``.+``: a decoded path may hold a newline, and such a name must
# reach journal_name() to be refused as JSON, not fall through to aiohttp's text 404.
JOURNAL_PATH = "/{journal:[\\s\\S]+}"
ENDPOINTS = (
    Endpoint("PUT", JOURNAL_PATH, handle_put, "gateway", "application/octet-stream", status=204,
             headers=APPEND_HEADERS, response_headers=COMMIT_HEADERS),
    Endpoint("GET", JOURNAL_PATH, handle_get, "gateway", response="application/octet-stream",
             status=206, query=READ_QUERY, headers=READ_REQUEST_HEADERS, response_headers=READ_HEADERS),
    Endpoint("HEAD", JOURNAL_PATH, handle_head, "gateway", query=READ_QUERY,
             response_headers=READ_HEADERS),
)


def add_routes(app: web.Application) -> None:
    add_endpoints(app, ENDPOINTS)


__all__ = ["APPEND_HEADERS", "add_routes", "append_from_request", "commit_headers", "serving_journal",
           "register_headers"]

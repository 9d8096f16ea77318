"""The HTTP gateway of the seed tutorial: ``PUT``, ``GET`` and ``HEAD /<journal>``.

Headers follow Gazette's gateway (``X-Write-Head``, ``X-Commit-Begin/End/SHA1-Sum``,
``Content-Range``, ``X-Fragment-Name``, ``X-Fragment-Location``); registers ride on
``X-Check-Registers`` (a selector), ``X-Union-Registers`` and
``X-Subtract-Registers`` (label sets), and come back in ``X-Registers``.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from urllib.parse import unquote

from aiohttp import web

from herald.auth import Capability
from herald.broker.authz import authorize_journal
from herald.broker.endpoints import Endpoint, Param, add_endpoints
from herald.broker.group import AppendCommit
from herald.broker.journal import Journal
from herald.broker.metrics import METRICS
from herald.broker.proxy import Forwarded, forward, is_proxied, route_revision
from herald.broker.read import StoreTroubleLog, stream
from herald.broker.service import Broker
from herald.broker.zerocopy import ChunkedSocketWriter, ZeroCopyRead, plan_zero_copy, send_zero_copy, supports_zero_copy
from herald.protocol.errors import (
    HeraldError,
    JournalNotFoundError,
    OffsetNotYetAvailableError,
    Status,
    ValidationError,
)
from herald.protocol.journal import JournalFlags, validate_journal_name
from herald.protocol.labels import LabelSelector, LabelSet

log = logging.getLogger(__name__)

MAX_OFFSET = (1 << 63) - 1
READ_PARAMS = {"offset", "block", "end_offset"}
SIGNED_URL_TTL_S = 60.0

store_trouble = StoreTroubleLog()


def journal_name(request: web.Request) -> str:
    """The journal of a gateway request, from the raw path: the router normalises
    ``..`` away, and a name like that must be refused, not silently rewritten."""
    return _journal_of_path(request.raw_path.split("?", 1)[0])


@functools.lru_cache(maxsize=4096)
def _journal_of_path(raw_path: str) -> str:
    """Decoding and validating a name is pure, and every append repeats it: cached
    (errors are not cached, so a bad name costs its full check every time)."""
    name = unquote(raw_path[1:])
    validate_journal_name(name, field="journal")
    return name


async def serving_journal(request: web.Request, name: str, need_primary: bool,
                          body: bytes | None = None) -> Journal:
    """The local journal to serve ``name``. When another broker serves it (cluster
    mode), the request is forwarded there and `Forwarded` raised with its answer:
    handlers see only the local case. Raises JOURNAL_NOT_FOUND for unknown journals."""
    broker: Broker = request.app["broker"]
    authorize_journal(request, name)
    journal = broker.local_journal(name, need_primary)
    if journal is not None:
        return journal
    if is_proxied(request):
        journal = await broker.catch_up_to_route(name, need_primary, route_revision(request))
        if journal is not None:
            return journal
        status = Status.NOT_JOURNAL_PRIMARY_BROKER if need_primary else Status.NOT_JOURNAL_BROKER
        if broker.keyspace.get(name) is None:
            raise JournalNotFoundError(name)
        raise HeraldError(status, f"this broker does not serve {name} (route changed); retry")
    target = await broker.route_target(name, need_primary)
    if target:
        credentials = broker.peer_headers(request.get("capability", Capability.READ), name)
        raise Forwarded(await forward(request, target, broker.session, body, credentials,
                                      broker.keyspace.revision))
    journal = broker.local_journal(name, need_primary)
    if journal is None:
        raise HeraldError(Status.NOT_JOURNAL_BROKER, f"no broker serves {name} yet; retry")
    return journal


def int_param(request: web.Request, key: str, default: int, minimum: int) -> int:
    """An integer query parameter in [minimum, 2^63): offsets are int64, as in Gazette."""
    raw = request.query.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError(key, f"must be an integer, not {raw!r}") from None
    if not minimum <= value <= MAX_OFFSET:
        raise ValidationError(key, f"must be in [{minimum}, 2^63), not {value}")
    return value


def bool_param(request: web.Request, key: str) -> bool:
    raw = request.query.get(key, "false").lower()
    if raw not in ("true", "false", "1", "0", ""):
        raise ValidationError(key, f"must be true or false, not {raw!r}")
    return raw in ("true", "1")


def reject_unknown_params(request: web.Request, allowed: set[str]) -> None:
    if not request.query_string:  # most requests: no query to parse
        return
    for key in request.query:
        if key not in allowed:
            raise ValidationError(key, "unknown query parameter")


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


# -- reads --------------------------------------------------------------------------------


def readable(journal: Journal) -> Journal:
    if not JournalFlags.is_readable(journal.spec.flags):
        raise HeraldError(Status.NOT_ALLOWED, f"journal {journal.spec.name} is not readable", "journal")
    return journal


def read_headers(broker: Broker, journal: Journal, offset: int) -> dict[str, str]:
    """Metadata of a read at ``offset``: where it starts and which fragment holds it."""
    headers = {"Content-Range": f"bytes {offset}-{MAX_OFFSET}/{MAX_OFFSET}",
               "X-Write-Head": str(journal.write_head),
               "Location": f"{broker.endpoint}/{journal.spec.name}"}
    located = journal.locate(offset)
    if located is not None:
        fragment = located.fragment
        headers["Content-Range"] = f"bytes {located.offset}-{MAX_OFFSET}/{MAX_OFFSET}"
        headers["X-Fragment-Name"] = fragment.content_name
        if fragment.store and fragment.mod_time:
            headers["X-Fragment-Last-Modified"] = email.utils.formatdate(fragment.mod_time, usegmt=True)
            store = next((s for s in journal.stores if s.url == fragment.store), None)
            if store is not None:
                headers["X-Fragment-Location"] = store.sign_get(fragment.content_path, SIGNED_URL_TTL_S)
    return headers


async def read_request(request: web.Request) -> tuple[Journal, int, bool, int]:
    """Parse and route a read: ``(journal, offset, block, end_offset)``."""
    name = journal_name(request)
    reject_unknown_params(request, READ_PARAMS)
    offset = int_param(request, "offset", 0, -1)
    end_offset = int_param(request, "end_offset", 0, 0)
    block = bool_param(request, "block")
    if end_offset and offset > end_offset:
        raise ValidationError("end_offset", "must be 0 or ≥ offset")
    journal = readable(await serving_journal(request, name, need_primary=False))
    if offset == -1:
        offset = journal.write_head
    return journal, offset, block, end_offset


async def handle_head(request: web.Request) -> web.StreamResponse:
    """A read's metadata only: where it starts, the write head, the fragment."""
    broker: Broker = request.app["broker"]
    journal, offset, _block, _end = await read_request(request)
    return web.Response(status=200, headers=read_headers(broker, journal, offset))


async def handle_get(request: web.Request) -> web.StreamResponse:
    """Stream committed content from ``offset``; 416 if nothing is there and not blocking."""
    broker: Broker = request.app["broker"]
    journal, offset, block, end_offset = await read_request(request)
    if not block and journal.locate(offset) is None:
        raise OffsetNotYetAvailableError(
            f"offset {offset} is not yet available (write head is {journal.write_head})",
            write_head=journal.write_head)
    if not block and supports_zero_copy(request.transport):
        read = plan_zero_copy(journal, offset, end_offset)
        if read is not None:
            return await _send_files(request, broker, journal, read)
    chunks = stream(journal, offset, block, end_offset, broker.stopping)
    first = None
    if offset < journal.write_head:
        # Below the head, the read may wait (a hole) or jump (pruned content): the
        # headers must name where the bytes really start, so fetch them first.
        offset, first = await _first_chunk(journal, offset, chunks)
    response = web.StreamResponse(status=206, headers=read_headers(broker, journal, offset))
    response.content_type = "application/octet-stream"
    await response.prepare(request)
    counter = METRICS.read_bytes.labels(journal.spec.name)
    direct = _direct_writer(request, response)
    write = direct.write if direct is not None else response.write
    try:
        if first:
            await write(first)
            counter.inc(len(first))
        async for _offset, chunk in chunks:
            await write(chunk)
            counter.inc(len(chunk))
    except OSError as err:
        if request.transport is None or request.transport.is_closing():
            # The reader went away (closed, reset, timed out): expected, not the store's fault.
            log.debug("reader went away", extra={"journal": journal.spec.name, "offset": offset})
            return response
        # The status line is already sent: end the stream early; the client sees the
        # offset it got to and reopens there, where _first_chunk reports the cause.
        store_trouble.warn(journal, offset, err)
        return response
    await response.write_eof()
    return response


def _direct_writer(request: web.Request, response: web.StreamResponse) -> ChunkedSocketWriter | None:
    """A writer that sends chunks without holding the GIL, where the connection
    allows (plain TCP, a chunked body); else None and aiohttp writes them."""
    transport = request.transport
    if (transport is None or not supports_zero_copy(transport)
            or response.headers.get("Transfer-Encoding") != "chunked"):
        return None
    return ChunkedSocketWriter(transport)


async def _send_files(request: web.Request, broker: Broker, journal: Journal,
                      read: ZeroCopyRead) -> web.StreamResponse:
    """A non-blocking read held whole in local uncompressed files: the same status
    and headers, a ``Content-Length``, and the bytes by ``sendfile``."""
    with read:
        response = web.StreamResponse(status=206, headers=read_headers(broker, journal, read.offset))
        response.content_type = "application/octet-stream"
        response.content_length = read.size_bytes
        await response.prepare(request)
        transport = request.transport
        try:
            assert transport is not None
            await send_zero_copy(transport, read)
        except (OSError, AssertionError) as err:
            # Fewer bytes than the promised length: only closing the connection
            # tells the client, which reopens where it got to.
            log.debug("journal=%s read at %d ended early: %s", journal.spec.name, read.offset, err)
            if transport is not None:
                transport.abort()
            return response
        METRICS.read_bytes.labels(journal.spec.name).inc(read.size_bytes)
    await response.write_eof()
    return response


async def _first_chunk(journal: Journal, offset: int, chunks) -> tuple[int, bytes | None]:
    """The read's first ``(offset, chunk)``, fetched before the status line goes out,
    so a fragment missing from its store is a clear error status rather than an
    empty 206 that a client would reopen forever."""
    try:
        return await anext(chunks)
    except StopAsyncIteration:
        return offset, None
    except FileNotFoundError as err:
        store_trouble.warn(journal, offset, err)
        journal.fragments.refresh_soon()  # the listing may know better (a re-upload)
        located = journal.locate(offset)
        where = f"fragment {located.fragment.content_name} in {located.fragment.store}" if located else "its fragment"
        raise HeraldError(Status.FRAGMENT_MISSING,
                          f"offset {offset} of {journal.spec.name} is in {where}, which is missing "
                          "from its store; restore the file, or remove the journal's stale fragment",
                          "offset", extra={"write_head": journal.write_head}) from None
    except OSError as err:
        store_trouble.warn(journal, offset, err)
        raise HeraldError(Status.FRAGMENT_STORE_UNHEALTHY,
                          f"reading {journal.spec.name} at {offset} failed: {err}", "offset") from None


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
READ_HEADERS = (
    Param("Content-Range", "`bytes <start>-<max>/<max>`: start moves past a pruned range."),
    Param("X-Write-Head", "The journal's write head.", int),
    Param("X-Fragment-Name", "The fragment holding the first offset."),
    Param("X-Fragment-Location", "A signed URL of that fragment, once persisted."),
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
             status=206, query=READ_QUERY, response_headers=READ_HEADERS),
    Endpoint("HEAD", JOURNAL_PATH, handle_head, "gateway", query=READ_QUERY,
             response_headers=READ_HEADERS),
)


def add_routes(app: web.Application) -> None:
    add_endpoints(app, ENDPOINTS)


__all__ = ["APPEND_HEADERS", "add_routes", "append_from_request", "commit_headers", "serving_journal",
           "register_headers"]

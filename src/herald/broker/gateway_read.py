"""The gateway's reads: ``GET`` and ``HEAD /<journal>?offset=N&block=…&end_offset=…``.

Headers follow Gazette's gateway (``Content-Range``, ``X-Write-Head``,
``X-Fragment-Name``, ``X-Fragment-Location``). A GET answers 206 with the bytes
from where they really start (past a pruned range: ``Content-Range`` says so);
416 only at or past the write head. Below the head, a range the index cannot
place yet (a replica that rolled forward after a fail-over, before its listing
shows the primary's fragments) is listed at once, else read from the primary,
else answered 503 to retry (`herald.broker.read_holes`) — never 416, never empty.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging

from aiohttp import web

from herald.broker.encoded_read import (
    ENCODED_BEGIN_HEADER,
    ENCODED_END_HEADER,
    SNAPPY_FRAMED,
    accepts_snappy_framed,
    open_encoded,
    plan_encoded,
)
from herald.broker.fragment_decode import DecodeBuffers
from herald.broker.gateway_request import (
    MAX_OFFSET,
    bool_param,
    int_param,
    journal_name,
    reject_unknown_params,
    serving_journal,
)
from herald.broker.journal import Journal
from herald.broker.metrics import METRICS
from herald.broker.read import StoreTroubleLog, stream
from herald.broker.read_holes import from_primary_or_hole_error, locate_or_list
from herald.broker.service import Broker
from herald.broker.zerocopy import ChunkedSocketWriter, ZeroCopyRead, plan_zero_copy, send_zero_copy, supports_zero_copy
from herald.fragment.coder import CodecError
from herald.fragment.snappy_framed import SNAPPY_IDENTIFIER
from herald.protocol.errors import HeraldError, OffsetNotYetAvailableError, Status, ValidationError
from herald.protocol.journal import JournalFlags

log = logging.getLogger(__name__)

READ_PARAMS = {"offset", "block", "end_offset"}
SIGNED_URL_TTL_S = 60.0

store_trouble = StoreTroubleLog()


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
    await locate_or_list(journal, offset)  # a hole below the head: the listing may know its fragment
    return web.Response(status=200, headers=read_headers(broker, journal, offset))


async def handle_get(request: web.Request) -> web.StreamResponse:
    """Stream committed content from ``offset``; 416 if nothing is there yet (at or
    past the write head) and not blocking. A hole below the head is listed, else
    read from the primary, else a retryable 503 (`herald.broker.read_holes`)."""
    broker: Broker = request.app["broker"]
    journal, offset, block, end_offset = await read_request(request)
    if not block and await locate_or_list(journal, offset) is None:
        if offset < journal.write_head:
            raise await from_primary_or_hole_error(request, broker, journal, offset)
        raise OffsetNotYetAvailableError(
            f"offset {offset} is not yet available (write head is {journal.write_head})",
            write_head=journal.write_head)
    if not block and supports_zero_copy(request.transport):
        read = plan_zero_copy(journal, offset, end_offset)
        if read is not None:
            return await _send_files(request, broker, journal, read)
        if accepts_snappy_framed(request.headers.get("Accept-Encoding", "")):
            encoded = await _open_encoded(journal, offset, end_offset)
            if encoded is not None:
                return await _send_files(request, broker, journal, *encoded)
    buffers = DecodeBuffers()
    chunks = stream(journal, offset, block, end_offset, broker.stopping, buffers)
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
            if direct is not None:  # its bytes are in the kernel: the decoder may reuse the buffer
                buffers.give_back(chunk)
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


async def _open_encoded(journal: Journal, offset: int,
                        end_offset: int) -> tuple[ZeroCopyRead, dict[str, str], bytes, int] | None:
    """A read held whole in local SNAPPY fragments, opened to be sent in their
    stored chunks (`herald.broker.encoded_read`): the files, the extra headers, the
    body's first bytes and the read's content length; None if it is not one, or a
    file cannot be read (the decoded path then reports why)."""
    parts = plan_encoded(journal, offset, end_offset)
    if not parts:
        return None
    try:
        read, begin = await asyncio.get_running_loop().run_in_executor(None, open_encoded, parts)
    except (OSError, CodecError) as err:
        log.debug("journal=%s read at %d is sent decoded: %s", journal.spec.name, offset, err)
        return None
    headers = {"Content-Encoding": SNAPPY_FRAMED, ENCODED_BEGIN_HEADER: str(begin),
               ENCODED_END_HEADER: str(parts[-1].hi)}
    return read, headers, SNAPPY_IDENTIFIER, parts[-1].hi - parts[0].lo


async def _send_files(request: web.Request, broker: Broker, journal: Journal, read: ZeroCopyRead,
                      extra_headers: dict[str, str] | None = None, first: bytes = b"",
                      content_bytes: int | None = None) -> web.StreamResponse:
    """A non-blocking read held whole in local uncompressed files (or, with
    ``extra_headers`` and ``first`` bytes, in stored SNAPPY chunks of
    ``content_bytes``): the same status and headers, a ``Content-Length``, and the
    files' bytes by ``sendfile``."""
    with read:
        response = web.StreamResponse(status=206, headers={**read_headers(broker, journal, read.offset),
                                                           **(extra_headers or {})})
        response.content_type = "application/octet-stream"
        response.content_length = len(first) + read.size_bytes
        await response.prepare(request)
        if first:
            await response.write(first)
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
        METRICS.read_bytes.labels(journal.spec.name).inc(read.size_bytes if content_bytes is None else content_bytes)
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


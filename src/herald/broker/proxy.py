"""Forwarding a request to the broker that can serve it (cluster mode).

Any broker accepts any request: a journal it does not serve (or an append when
it is not the primary) is streamed to the right broker and the answer streamed
back. A proxied request carries ``X-Herald-Proxied`` so it is never proxied twice:
It also carries ``X-Herald-Route-Revision``, the keyspace revision whose route chose
the target: as Gazette's resolver does, the target first catches up with that
revision (its own watch may lag the proxier's by a few milliseconds) and only then,
if it still cannot serve, answers NOT_JOURNAL_(PRIMARY_)BROKER for the client to
retry after re-resolving.

A forward is abandoned when the target stops serving the journal while the request
waits for its answer: a broker that is stopped (SIGSTOP, a hung VM) holds the
connection open and never answers, and the route moves on once its lease expires.
The client then gets a retryable status instead of hanging for its whole timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import aiohttp
from aiohttp import web

from herald.protocol.errors import HeraldError, Status

PROXIED_HEADER = "X-Herald-Proxied"
ROUTE_REVISION_HEADER = "X-Herald-Route-Revision"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "host", "content-length"}


class Forwarded(Exception):  # a path of the request, not an error
    """The request was forwarded; ``response`` is the answer already streamed back.
    Raised past the handler so handlers see only journals served here (the
    errors middleware returns it), as aiohttp raises its HTTP responses."""

    def __init__(self, response: web.StreamResponse) -> None:
        super().__init__(response.status)
        self.response = response


def is_proxied(request: web.Request) -> bool:
    return PROXIED_HEADER in request.headers


def route_revision(request: web.Request) -> int:
    """The keyspace revision the proxier routed by (0 when absent or malformed:
    a peer's header is never trusted to hold the request for long)."""
    raw = request.headers.get(ROUTE_REVISION_HEADER, "0")
    return int(raw) if raw.isdigit() and len(raw) < 20 else 0


async def forward(request: web.Request, endpoint: str, session: aiohttp.ClientSession,
                  body: bytes | None = None, credentials: dict[str, str] | None = None,
                  revision: int = 0, rerouted: Awaitable[None] | None = None) -> web.StreamResponse:
    """Stream ``request`` to ``endpoint`` and its response back, chunk by chunk.

    ``body`` is given when the handler already read the request body (JSON APIs).
    ``credentials`` (the broker's own token, scoped to this journal) replace the
    client's: the client's token was checked here, and need not travel further.
    ``rerouted`` completes when ``endpoint`` no longer serves the journal: a forward
    still waiting for its answer then fails as retryable (see the module docstring).
    """
    headers = {k: v for k, v in request.headers.items()
               if k.lower() not in HOP_BY_HOP and k.lower() != "authorization"}
    headers.update(credentials or {})
    headers[PROXIED_HEADER] = "1"
    headers[ROUTE_REVISION_HEADER] = str(revision)
    if body is None and request.can_read_body:
        body = request.content.iter_any()
    try:
        upstream = await _answer_unless_rerouted(session.request(
            request.method, f"{endpoint}{request.raw_path}", headers=headers, data=body,
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None), auto_decompress=False), rerouted, endpoint)
    except aiohttp.ClientError as err:
        # The broker we were routed to is gone (crashed, partitioned): retryable, and
        # the next resolution will see the new route once its lease expires.
        raise HeraldError(Status.NO_JOURNAL_PRIMARY_BROKER,
                          f"broker {endpoint} is unreachable ({type(err).__name__}); retry") from None
    try:
        response = web.StreamResponse(status=upstream.status, headers={
            k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP})
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        upstream.release()


async def _answer_unless_rerouted(answer: Awaitable[aiohttp.ClientResponse], rerouted: Awaitable[None] | None,
                                  endpoint: str) -> aiohttp.ClientResponse:
    """The upstream answer's head, or a retryable error if the route moves away from
    ``endpoint`` first. An abandoned append's outcome is unknown to the client, as
    after its own timeout: appends are at-least-once, messages carry UUIDs for that."""
    if rerouted is None:
        return await answer
    answering, moved = asyncio.ensure_future(answer), asyncio.ensure_future(rerouted)
    try:
        await asyncio.wait((answering, moved), return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when this request is cancelled (its client went away)
        moved.cancel()
        answered = answering.done()
        if not answered:
            answering.cancel()
    if not answered:
        raise HeraldError(Status.NO_JOURNAL_PRIMARY_BROKER,
                          f"broker {endpoint} stopped serving the journal before it answered "
                          "(its outcome is unknown); retry")
    return answering.result()

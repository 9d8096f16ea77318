"""The broker's aiohttp application and process entry point (``herald serve``).

Errors never fall through as tracebacks: a ``HeraldError`` becomes its status's
HTTP code with a JSON ``{status, message, field}`` body; a client that goes away
mid-request is logged quietly; anything else is a bug, logged with its traceback
and answered with a generic 500.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import signal

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from herald.broker import control, gateway, health, openapi, replication, status_page
from herald.broker.authz import auth_middleware
from herald.broker.collector import BrokerCollector
from herald.broker.endpoints import Endpoint, add_endpoints
from herald.broker.heap import keep_freed_body_memory
from herald.broker.limits import body_deadline_middleware
from herald.broker.loop_metrics import LoopMetrics
from herald.broker.metrics import LOOP, METRICS, count_request, request_op
from herald.broker.proxy import Forwarded
from herald.broker.service import Broker
from herald.broker.settings import BrokerSettings
from herald.protocol.errors import HTTP_CODES, HeraldError, Status

log = logging.getLogger(__name__)

STOP_DEADLINE_S = 20.0


def error_response(err: HeraldError) -> web.Response:
    headers = {}
    write_head = (err.extra or {}).get("write_head")
    if write_head is not None:
        headers["X-Write-Head"] = str(write_head)
    registers = (err.extra or {}).get("registers")
    if registers is not None:
        headers["X-Registers"] = str(registers)
    body = orjson.dumps(err.to_dict(), default=str)
    return web.Response(status=err.http_code, body=body, headers=headers,
                        content_type="application/json")


@web.middleware
async def errors_middleware(request: web.Request, handler):
    """Answer errors as JSON, and count every request by operation and status
    (``herald_broker_requests_total``; reads in flight in ``herald_broker_active_reads``)."""
    op, status = request_op(request.method, request.path), "OK"
    reading = op == "read" and request.method == "GET"
    if reading:
        METRICS.active_reads.value += 1
    try:
        return await handler(request)
    except Forwarded as forwarded:  # served by another broker: its answer, already streamed
        status = "PROXIED"
        return forwarded.response
    except HeraldError as err:
        status = err.status.name
        return error_response(err)
    except web.HTTPException as exc:
        status = f"HTTP_{exc.status}"
        if exc.status == 413:
            return error_response(HeraldError(Status.PAYLOAD_TOO_LARGE, exc.text or "too large", "body"))
        if exc.status == 405:
            return error_response(HeraldError(Status.METHOD_NOT_ALLOWED,
                                              f"method {request.method} is not supported"))
        raise
    except ConnectionResetError:
        status = Status.CLIENT_CLOSED_REQUEST.name
        # The client went away (mid-body, or before headers could be sent): expected,
        # not an error. Nothing was appended [I-APPEND-2]; the 499 is never delivered,
        # it only keeps aiohttp from logging the reset as a server error.
        log.debug("client went away", extra={"method": request.method, "path": request.path})
        return web.Response(status=HTTP_CODES[Status.CLIENT_CLOSED_REQUEST])
    except asyncio.CancelledError:
        status = "CANCELLED"
        log.debug("request cancelled", extra={"method": request.method, "path": request.path})
        raise
    except Exception:
        status = Status.INTERNAL.name
        log.exception("internal error", extra={"method": request.method, "path": request.path})
        return error_response(HeraldError(Status.INTERNAL, "internal error (logged by the broker)"))
    finally:
        count_request(op, status)
        if reading:
            METRICS.active_reads.value -= 1


@web.middleware
async def identity_bodies_middleware(request: web.Request, handler):
    """Refuse request bodies sent with a ``Content-Encoding``.

    Appends are stored byte for byte and compressed per fragment by the journal's
    codec, so a compressed request body buys nothing; accepting one would let a few
    bytes of gzip inflate into gigabytes past the body limit, and a body that only
    claims to be compressed failed deep in aiohttp's decoder. Gazette's gateway takes
    raw bodies too. Checked before the body is read, so nothing is written.
    """
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", ""):
        raise HeraldError(Status.UNSUPPORTED_MEDIA_TYPE,
                          f"request bodies must not be encoded (Content-Encoding: {encoding}); "
                          "send the raw bytes", "Content-Encoding")
    # The same for transfer codings: aiohttp undoes ``chunked`` but would hand a
    # ``gzip, chunked`` body over still gzipped, to be appended as if it were raw.
    codings = {c.strip().lower() for c in request.headers.get("Transfer-Encoding", "").split(",")}
    if codings - {"chunked", ""}:
        raise HeraldError(Status.UNSUPPORTED_MEDIA_TYPE,
                          "only the chunked transfer coding is accepted, not "
                          f"{request.headers['Transfer-Encoding']!r}", "Transfer-Encoding")
    return await handler(request)


async def handle_metrics(_request: web.Request) -> web.Response:
    """Prometheus metrics of this broker (docs/operations.md lists them)."""
    return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def handle_prometheus(request: web.Request) -> web.Response:
    """Prometheus metrics of this broker, at Prometheus's usual path (as ``/debug/metrics``)."""
    return await handle_metrics(request)


_current_broker: list[Broker] = []  # the broker BrokerCollector reports (one per process)


def _register_collector(broker: Broker) -> None:
    if not _current_broker:
        REGISTRY.register(BrokerCollector(lambda: _current_broker[0] if _current_broker else None))
        REGISTRY.register(LoopMetrics(LOOP))
    _current_broker[:] = [broker]


def make_app(broker: Broker) -> web.Application:
    app = web.Application(middlewares=[errors_middleware, auth_middleware, identity_bodies_middleware,
                                       body_deadline_middleware],
                          client_max_size=broker.settings.max_append_bytes)
    app["broker"] = broker
    add_endpoints(app, [Endpoint("GET", "/debug/metrics", handle_metrics, "meta", response="text/plain"),
                        Endpoint("GET", "/metrics", handle_prometheus, "meta", response="text/plain")])
    _register_collector(broker)
    health.add_routes(app)
    status_page.add_routes(app)
    openapi.add_routes(app)
    control.add_routes(app)
    replication.add_routes(app)
    gateway.add_routes(app)
    return app


async def stop_within_deadline(broker: Broker) -> None:
    """Stop gracefully, but within ``STOP_DEADLINE_S`` whatever clients or stores do
    [I-RESTART-1]. Cutting a stop short loses nothing: every acknowledged byte is
    already in a durable local spool, recovered and persisted at the next start
    [I-FRAG-2], and a cluster member's lease simply runs out."""
    try:
        await asyncio.wait_for(broker.stop(), STOP_DEADLINE_S)
    except TimeoutError:
        log.warning("graceful stop took over %.0f s; exiting now (unpersisted spools are kept "
                    "on local disk and persisted after restart)", STOP_DEADLINE_S)


def raise_open_file_limit() -> int:
    """Raise the soft limit on open descriptors to the hard limit, as Go's runtime
    does at start: a broker holds descriptors per served journal and connection,
    and the common soft default (1024) is far below what the machine allows.
    Returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as err:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, err)
    return soft


async def serve(settings: BrokerSettings, ready=print) -> None:
    """Run a broker until SIGTERM/SIGINT; ``ready`` gets the one 'listening' line."""
    log.info("open-file limit %d", raise_open_file_limit())
    keep_freed_body_memory()
    broker = Broker(settings)
    endpoint = await broker.start(make_app(broker))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ready(f"herald broker listening on {endpoint}")
    await stop.wait()  # a lost etcd lease is healed in-process (herald.broker.membership.keep_lease)
    await stop_within_deadline(broker)

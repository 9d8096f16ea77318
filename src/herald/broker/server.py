"""The broker's aiohttp application and process entry point (``herald serve``).

Errors never fall through as tracebacks: a ``HeraldError`` becomes its status's
HTTP code with a JSON ``{status, message, field}`` body; a client that goes away
mid-request is logged quietly; anything else is a bug, logged with its traceback
and answered with a generic 500.
"""

from __future__ import annotations

import asyncio
import logging
import signal

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from herald.broker import control, gateway, replication
from herald.broker.service import Broker
from herald.broker.settings import BrokerSettings
from herald.protocol.errors import HeraldError, Status

log = logging.getLogger(__name__)


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
    try:
        return await handler(request)
    except HeraldError as err:
        return error_response(err)
    except web.HTTPException as exc:
        if exc.status == 413:
            return error_response(HeraldError(Status.PAYLOAD_TOO_LARGE, exc.text or "too large", "body"))
        if exc.status == 405:
            return error_response(HeraldError(Status.METHOD_NOT_ALLOWED,
                                              f"method {request.method} is not supported"))
        raise
    except (ConnectionResetError, asyncio.CancelledError):
        log.debug("client went away method=%s path=%s", request.method, request.path)
        raise
    except Exception:
        log.exception("internal error method=%s path=%s", request.method, request.path)
        return error_response(HeraldError(Status.INTERNAL, "internal error (logged by the broker)"))


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
    return await handler(request)


async def handle_metrics(_request: web.Request) -> web.Response:
    return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})


def make_app(broker: Broker) -> web.Application:
    app = web.Application(middlewares=[errors_middleware, identity_bodies_middleware],
                          client_max_size=broker.settings.max_append_bytes)
    app["broker"] = broker
    app.router.add_get("/debug/metrics", handle_metrics)
    control.add_routes(app)
    replication.add_routes(app)
    gateway.add_routes(app)
    return app


async def serve(settings: BrokerSettings, ready=print) -> None:
    """Run a broker until SIGTERM/SIGINT; ``ready`` gets the one 'listening' line."""
    broker = Broker(settings)
    endpoint = await broker.start(make_app(broker))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ready(f"herald broker listening on {endpoint}")
    lease_lost = asyncio.ensure_future(broker.lease_lost.wait())
    await asyncio.wait([asyncio.ensure_future(stop.wait()), lease_lost],
                       return_when=asyncio.FIRST_COMPLETED)
    await broker.stop()
    if lease_lost.done():
        raise SystemExit("herald: the broker's etcd lease expired; exiting so it can rejoin afresh")

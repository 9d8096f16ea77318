"""``GET /api/bikes?id=N``: a bike's most recent rides as NDJSON, served from PostgreSQL.

Gazette's history API, over the store the job keeps exactly once: one JSON
object per line (``UUID``, ``StartTime``, ``EndTime``, ``StartStation``,
``EndStation``), oldest first. Bad parameters get ``400`` with the error's
``field`` (``id``, ``limit``), as the broker's API answers; an unknown bike is
``200`` with no lines (it may simply not have ridden yet).
"""

from __future__ import annotations

import asyncio
import json
import logging

import psycopg
from aiohttp import web

from herald.examples.bike_share.store import recent_rides
from herald.protocol.errors import ValidationError

__all__ = ["make_app", "parse_query"]

log = logging.getLogger(__name__)
MAX_LIMIT = 1000
DSN_KEY = web.AppKey("dsn", str)


def _int_param(query: dict[str, str], name: str, default: int | None, low: int, high: int) -> int:
    text = query.get(name)
    if text is None or text == "":
        if default is None:
            raise ValidationError(name, "required: a bike ID, e.g. /api/bikes?id=38536")
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValidationError(name, f"want an integer, got {text[:40]!r}") from None
    if not low <= value <= high:
        raise ValidationError(name, f"want {low}..{high}, got {value}")
    return value


def parse_query(query: dict[str, str], default_limit: int = 20) -> tuple[int, int]:
    """``(bike id, limit)`` from the query string; `ValidationError` names the bad field."""
    return _int_param(query, "id", None, 0, 2**31 - 1), _int_param(query, "limit", default_limit, 1, MAX_LIMIT)


def _error(err: ValidationError) -> web.Response:
    return web.json_response(err.to_dict(), status=400)


async def bikes(request: web.Request) -> web.StreamResponse:
    try:
        bike_id, limit = parse_query(dict(request.query))
    except ValidationError as err:
        return _error(err)
    dsn = request.app[DSN_KEY]

    def query() -> list[dict]:
        with psycopg.connect(dsn) as conn:
            return recent_rides(conn, bike_id, limit)

    try:
        rides = await asyncio.get_running_loop().run_in_executor(None, query)
    except psycopg.OperationalError as err:
        log.warning("bike history query failed: %s", err)
        body = {"status": "UNAVAILABLE", "message": "the ride store (PostgreSQL) is unavailable", "field": "dsn"}
        return web.json_response(body, status=503)
    body = "".join(json.dumps(r) + "\n" for r in rides)
    return web.Response(text=body, content_type="application/x-ndjson")


def make_app(dsn: str) -> web.Application:
    app = web.Application()
    app[DSN_KEY] = dsn
    app.router.add_get("/api/bikes", bikes)
    return app

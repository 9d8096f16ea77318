"""The broker's status page at ``/``: members, journals, rates, stores, pipelines.

Server-rendered HTML (Jinja2, `templates/status.html`) with a stylesheet and a
tiny script shipped in this package (`static/`): no front-end build. The script
re-fetches the page every few seconds and swaps its body in; without JavaScript a
``<meta refresh>`` does the same. Sparklines are inline SVG drawn from the rate
rings of `rates`; pipelines appear once they report (`reports`).

Under ``--auth-keys`` the page needs a token with the LIST capability — from the
``Authorization`` header, or from the ``herald_token`` cookie that the page's own
form sets for a browser — and shows only the journals that token may see. The
static files carry no data and are open; they live under ``/~status/``, a path no
journal can have (``~`` is outside the journal-name charset).
"""

from __future__ import annotations

import asyncio
import contextlib
from importlib import resources

import jinja2
from aiohttp import web

from herald.auth import Capability, Claims
from herald.broker.authz import UNRESTRICTED, authenticate
from herald.broker.endpoints import Endpoint, add_endpoints
from herald.broker.metrics import STATIC_PREFIX
from herald.broker.status_page import reports
from herald.broker.status_page.rates import RateHistory, run_sampler
from herald.broker.status_page.view import page
from herald.protocol.errors import HeraldError, Status

__all__ = ["COOKIE", "ENDPOINTS", "add_routes"]

COOKIE = "herald_token"
STATIC_FILES = {"status.css": "text/css", "status.js": "text/javascript"}
HISTORY_KEY = web.AppKey("herald_rate_history", RateHistory)
SAMPLER_KEY = web.AppKey("herald_rate_sampler", asyncio.Task)
_ENV = jinja2.Environment(loader=jinja2.PackageLoader("herald.broker.status_page", "templates"),
                          autoescape=True, trim_blocks=True, lstrip_blocks=True)


def _bytes(value: float) -> str:
    """``1.5 MiB``: sizes and rates as a person reads them."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


_ENV.filters["bytes"] = _bytes
_ENV.filters["age"] = _age


def page_claims(request: web.Request) -> Claims:
    """The page's viewer: anyone without ``--auth-keys``; else a verified token
    (header, or the cookie the page's form sets) with LIST. Raises HeraldError."""
    keys = request.app["broker"].auth_keys
    if keys is None:
        return UNRESTRICTED
    cookie = request.cookies.get(COOKIE)
    claims = keys.verify(cookie) if cookie and "Authorization" not in request.headers else authenticate(keys, request)
    if not claims.allows(Capability.LIST):
        raise HeraldError(Status.PERMISSION_DENIED, "the token lacks the LIST capability", "Authorization")
    return claims


async def handle_status(request: web.Request) -> web.Response:
    """The status page (HTML): members, journals, rates, stores, pipelines."""
    try:
        claims = page_claims(request)
    except HeraldError as err:
        if err.status not in (Status.UNAUTHORIZED, Status.PERMISSION_DENIED):
            raise
        html = _ENV.get_template("login.html").render(message=err.message, static=STATIC_PREFIX)
        return web.Response(status=err.http_code, text=html, content_type="text/html")
    app = request.app
    doc = page(app["broker"], claims, app[HISTORY_KEY], app[reports.REPORTS_KEY])
    html = _ENV.get_template("status.html").render(static=STATIC_PREFIX, **doc)
    return web.Response(text=html, content_type="text/html", headers={"Cache-Control": "no-store"})


async def handle_static(request: web.Request) -> web.Response:
    """The page's stylesheet and script (shipped in the package)."""
    name = request.match_info["name"]
    if name not in STATIC_FILES:
        raise HeraldError(Status.JOURNAL_NOT_FOUND, f"no static file {name!r}", "path")
    body = resources.files(__package__).joinpath("static", name).read_bytes()
    return web.Response(body=body, content_type=STATIC_FILES[name], headers={"Cache-Control": "max-age=300"})


async def _start_sampler(app: web.Application) -> None:
    broker = app["broker"]
    app[SAMPLER_KEY] = asyncio.create_task(run_sampler(app[HISTORY_KEY], lambda: list(broker.journals)),
                                           name="status-rates")


async def _stop_sampler(app: web.Application) -> None:
    task = app.get(SAMPLER_KEY)
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


ENDPOINTS = (
    Endpoint("GET", "/", handle_status, "meta", response="text/html"),
    Endpoint("GET", STATIC_PREFIX + "{name}", handle_static, "meta", response="text/css",
             response_media_types=("text/javascript",)),
)


def add_routes(app: web.Application) -> None:
    """Register ``/``, its static files and the pipelines' report endpoint; the rate
    sampler runs for the app's lifetime."""
    app[HISTORY_KEY] = RateHistory()
    app.on_startup.append(_start_sampler)
    app.on_cleanup.append(_stop_sampler)
    reports.add_routes(app)
    add_endpoints(app, ENDPOINTS)

"""The word-count query service: bigram counts over HTTP (JSON), from the job's output.

    GET /api/bigram?w1=the&w2=city          → {"bigram": "the city", "count": 12}
    GET /api/bigrams?prefix=the%20c&limit=5 → {"prefix": "the c", "bigrams": [{"bigram": …, "count": …}, …],
                                               "truncated": false}
    GET /api/status                         → per count journal: read_through, bad_messages; totals

One process reads *every* count journal (`CountsFollower`) and answers every
query itself: the model is a dict of a few bytes per bigram, so one process
holds a large corpus' bigrams, and a prefix query needs all journals anyway
(the job maps bigrams to journals by hash, not by prefix). Gazette's consumer
instead serves each shard's keys from that shard and proxies; scale-out here
would be more replicas of this service, each reading all journals.

Queries are checked at the edge: unknown or repeated parameters, a missing or
malformed word, a prefix or limit out of bounds all answer 400 with Herald's
error shape ``{"status", "message", "field"}`` naming the parameter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from aiohttp import web

from herald.examples.word_count.follower import CountsFollower
from herald.examples.word_count.model import BigramCounts
from herald.examples.word_count.tokens import bigram_key, normalise_prefix
from herald.protocol.errors import HeraldError, ValidationError

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "READY_PREFIX", "ServiceSettings", "make_app", "serve"]

log = logging.getLogger(__name__)

READY_PREFIX = "word-count service listening on "
DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
MAX_QUERY_CHARS = 4096


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    broker: str
    counts: str
    host: str = "127.0.0.1"
    port: int = 8090


def _params(request: web.Request, allowed: set[str]) -> dict[str, str]:
    """The query parameters, each at most once and all known (else a ValidationError)."""
    if len(request.query_string) > MAX_QUERY_CHARS:
        raise ValidationError("query", f"longer than {MAX_QUERY_CHARS} characters")
    out: dict[str, str] = {}
    for name, value in request.query.items():
        if name not in allowed:
            raise ValidationError(name[:40], f"unknown parameter (want {', '.join(sorted(allowed))})")
        if name in out:
            raise ValidationError(name, "given more than once")
        out[name] = value
    return out


def _limit(params: Mapping[str, str]) -> int:
    text = params.get("limit", str(DEFAULT_LIMIT))
    try:
        limit = int(text)
    except ValueError:
        raise ValidationError("limit", f"want an integer, got {text[:40]!r}") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError("limit", f"want 1..{MAX_LIMIT}, got {limit}")
    return limit


def _required(params: Mapping[str, str], name: str) -> str:
    if name not in params:
        raise ValidationError(name, "required")
    return params[name]


@web.middleware
async def _errors(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                  ) -> web.StreamResponse:
    """Herald's errors as JSON with their HTTP code; a bug is a logged 500 with no detail."""
    try:
        return await handler(request)
    except HeraldError as err:
        return web.json_response(err.to_dict(), status=err.http_code)
    except web.HTTPException:
        raise
    except Exception:  # noqa: BLE001 — the process edge: log it, tell the client nothing internal.
        log.exception("word-count query failed: %s %s", request.method, request.path)
        return web.json_response({"status": "INTERNAL", "message": "internal error", "field": ""}, status=500)


def make_app(model: BigramCounts, follower: CountsFollower | None = None) -> web.Application:
    """The HTTP routes over ``model`` (``follower`` feeds ``/api/status``)."""

    async def bigram(request: web.Request) -> web.Response:
        params = _params(request, {"w1", "w2"})
        key = bigram_key(_required(params, "w1"), _required(params, "w2"))
        w1, w2 = key.split(" ")
        return web.json_response({"bigram": key, "w1": w1, "w2": w2, "count": model.count(key)})

    async def with_prefix(request: web.Request) -> web.Response:
        params = _params(request, {"prefix", "limit"})
        prefix, limit = normalise_prefix(_required(params, "prefix")), _limit(params)
        match = model.with_prefix(prefix, limit)
        return web.json_response({"prefix": prefix, "truncated": match.truncated,
                                  "bigrams": [{"bigram": b, "count": c} for b, c in match.bigrams]})

    async def status(request: web.Request) -> web.Response:
        _params(request, set())
        journals = {name: {"read_through": p.read_through, "bad_messages": p.bad_messages, "error": p.error}
                    for name, p in sorted((follower.progress if follower else {}).items())}
        return web.json_response({"bigrams": len(model), "updates": model.updates, "journals": journals})

    app = web.Application(middlewares=[_errors], client_max_size=MAX_QUERY_CHARS)
    app.router.add_get("/api/bigram", bigram)
    app.router.add_get("/api/bigrams", with_prefix)
    app.router.add_get("/api/status", status)
    return app


async def serve(settings: ServiceSettings, ready: Callable[[str], None] = print) -> None:
    """Follow the count journals and answer queries until cancelled (Ctrl-C)."""
    model = BigramCounts()
    follower = CountsFollower(settings.broker, settings.counts, model)
    journals = follower.start()
    if not journals:
        raise ValidationError("counts", f"{settings.counts!r} matches no journals: run `setup` first")
    runner = web.AppRunner(make_app(model, follower), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port)
    await site.start()
    host, port = runner.addresses[0][:2]
    ready(f"{READY_PREFIX}http://{host}:{port} (following {len(journals)} count journals)")
    try:
        await asyncio.Event().wait()
    finally:
        follower.stop()
        await runner.cleanup()

"""Parsing and routing a gateway request: the journal named by the raw path, the
query parameters, and the local journal that serves it — or a forward to the
broker that does, which answers in its place.

Shared by the gateway's appends (`herald.broker.gateway`), its reads
(`herald.broker.gateway_read`) and the JSON control API.
"""

from __future__ import annotations

import functools
from urllib.parse import unquote

from aiohttp import web

from herald.auth import Capability
from herald.broker.authz import authorize_journal
from herald.broker.journal import Journal
from herald.broker.proxy import Forwarded, forward, is_proxied, route_revision
from herald.broker.service import Broker
from herald.protocol.errors import HeraldError, JournalNotFoundError, Status, ValidationError
from herald.protocol.journal import validate_journal_name

MAX_OFFSET = (1 << 63) - 1


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
                                      broker.keyspace.revision, broker.until_rerouted(name, need_primary, target)))
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


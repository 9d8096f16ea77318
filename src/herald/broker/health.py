"""Kubernetes probes: ``/healthz`` (the process answers) and ``/readyz`` (send it traffic).

A broker is *ready* when, as far as it can tell, a request it takes will be served
rather than wait or fail:

- **keyspace**: it is not stopping, and in a cluster its etcd lease is certainly
  its own (an expired lease means it acknowledges nothing until it re-joins);
- **stores**: the first store of every journal it serves passed its last health
  probe (an append to a journal whose store is down waits, then fails);
- **assignments**: every journal has a primary broker, and every journal routed to
  this broker is open here in the role the route gives it.

An unready answer is a 503 with ``{"ready": false, "reasons": [{"check", "message"}]}``.
Reasons count journals rather than name them, since the probes need no token even
under ``--auth-keys`` (a journal a token may not see must stay invisible); store
URLs are named, being the operator's configuration. The checks read in-memory state
only — a probe never waits on etcd or a store — so probing often costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from aiohttp import web

from herald.broker.endpoints import Endpoint, add_endpoints
from herald.broker.service import Broker
from herald.fragment.health import health_of

__all__ = ["ENDPOINTS", "Reason", "add_routes", "readiness"]


@dataclass(frozen=True, slots=True)
class Reason:
    """Why the broker is not ready: which check failed, in a sentence."""

    check: str
    message: str


def readiness(broker: Broker) -> list[Reason]:
    """Every reason the broker is not ready now (empty: ready). Runs on the loop."""
    return [*_keyspace_reasons(broker), *_store_reasons(broker), *_assignment_reasons(broker)]


def _keyspace_reasons(broker: Broker) -> list[Reason]:
    if broker.stopping.is_set():
        return [Reason("keyspace", "the broker is stopping")]
    if broker.keyspace is None or not broker.endpoint:
        return [Reason("keyspace", "the keyspace is not loaded yet")]
    if not broker.may_acknowledge():
        return [Reason("keyspace", "the etcd lease of this broker may have expired; re-joining the cluster")]
    return []


def _store_reasons(broker: Broker) -> list[Reason]:
    """The first store of each served journal: where its spools must go."""
    stores = {journal.stores[0].url: journal.stores[0] for journal in broker.journals.values() if journal.stores}
    reasons = []
    for url, store in sorted(stores.items()):
        state = health_of(store).statistics()  # starts probing a store nothing has appended to yet
        if not state.checked:
            reasons.append(Reason("stores", f"fragment store {url} is not checked yet"))
        elif not state.healthy:
            reasons.append(Reason("stores", f"fragment store {url} is unhealthy: {state.last_error}"))
    return reasons


def _assignment_reasons(broker: Broker) -> list[Reason]:
    entries = broker.keyspace.entries() if broker.keyspace is not None else {}
    no_primary = unserved = wrong_role = 0
    for name in entries:
        route = broker.route(name)
        if route.primary < 0:
            no_primary += 1
        if broker.member_id not in route.members:
            continue
        journal = broker.journals.get(name)
        if journal is None:
            unserved += 1
        elif journal.is_primary != (route.primary_member == broker.member_id):
            wrong_role += 1
    reasons = []
    if no_primary:
        reasons.append(Reason("assignments", f"{no_primary} journal(s) have no primary broker yet "
                                             "(the allocator has not assigned them)"))
    if unserved:
        reasons.append(Reason("assignments", f"{unserved} journal(s) routed to this broker are not served "
                                             "here yet (or cannot be opened: see the log)"))
    if wrong_role:
        reasons.append(Reason("assignments", f"{wrong_role} journal(s) here have not taken the role "
                                             "their route gives them yet"))
    return reasons


async def handle_healthz(_request: web.Request) -> web.Response:
    """Liveness: the process answers HTTP (it checks nothing else)."""
    return web.Response(body=b'{"ok":true}', content_type="application/json")


async def handle_readyz(request: web.Request) -> web.Response:
    """Readiness: keyspace loaded, stores healthy, assignments settled; else 503 and why."""
    reasons = readiness(request.app["broker"])
    doc = {"ready": not reasons, "reasons": [{"check": r.check, "message": r.message} for r in reasons]}
    return web.Response(status=503 if reasons else 200, body=orjson.dumps(doc), content_type="application/json")


ENDPOINTS = (
    Endpoint("GET", "/healthz", handle_healthz, "meta", response="application/json"),
    Endpoint("GET", "/readyz", handle_readyz, "meta", response="application/json"),
)


def add_routes(app: web.Application) -> None:
    """Register the probes (before the gateway's catch-all ``/{journal}``)."""
    add_endpoints(app, ENDPOINTS)

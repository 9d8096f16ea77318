"""Authorization at the broker's edge (``--auth-keys``; off by default, as in Gazette).

`auth_middleware` verifies each request's bearer token and the capability its
endpoint needs, before any handler runs (so a refused request changes nothing),
and leaves the `Claims` on the request. Handlers then ask `authorize_journal`
(or `visible`) whether the token's selector sees a journal: one it may not see
answers JOURNAL_NOT_FOUND, exactly like a journal that does not exist. An apply
is checked against the labels of the specs it writes and a delete against the
journal's name, so neither reveals what exists.

Brokers sign their own short-lived tokens (`PeerTokens`) when they proxy a
request or replicate to peers, scoped to the one journal and capability at hand.

The peer endpoints (``/v1/replicate/*``) are never open, whatever the flags
(`authenticate_peer`): they need a token with REPLICATE verified by the broker's
*peer keys* — the ``--auth-keys`` less ``AA==``, or without them the cluster's peer
secret from etcd — and an embedded broker, having no peers, refuses them all.
"""

from __future__ import annotations

import time

from aiohttp import web

from herald.auth import ALL_CAPABILITIES, AuthKeys, Capability, Claims
from herald.broker.metrics import STATIC_PREFIX
from herald.protocol.errors import HeraldError, JournalNotFoundError, Status
from herald.protocol.labels import Label, LabelSelector, LabelSet, journal_meta_labels

__all__ = ["PeerTokens", "auth_middleware", "authenticate_peer", "authorize_journal", "claims_of",
           "required_capability", "visible"]

#: Paths every caller may use: Prometheus scrapes, probes and the API contract carry no
#: journal data.
OPEN_PATHS = frozenset({"/debug/metrics", "/metrics", "/healthz", "/readyz", "/v1/openapi.json"})
#: The status page's stylesheet and script: no data at all.
OPEN_PREFIX = STATIC_PREFIX
#: The status page checks its token itself (`herald.broker.status_page`): it also takes
#: one from a cookie, and answers a browser with a form rather than JSON.
SELF_CHECKED_PATHS = frozenset({"/"})
#: Broker-to-broker paths: authenticated by the peer keys, even without ``--auth-keys``.
PEER_PATHS = frozenset({"/v1/replicate/sync", "/v1/replicate/stream"})
CONTROL_CAPABILITIES = {
    "/v1/journals/list": Capability.LIST,
    "/v1/members/list": Capability.LIST,
    "/v1/journals/apply": Capability.APPLY,
    "/v1/journals/prune": Capability.APPLY,
    "/v1/journals/fragments": Capability.READ,
    "/v1/journals/append": Capability.APPEND,
    "/v1/pipelines/report": Capability.APPEND,
    "/v1/replicate/sync": Capability.REPLICATE,
    "/v1/replicate/stream": Capability.REPLICATE,
}
GATEWAY_CAPABILITIES = {"GET": Capability.READ, "HEAD": Capability.READ, "PUT": Capability.APPEND}
PEER_TOKEN_TTL_S = 60.0
UNRESTRICTED = Claims(ALL_CAPABILITIES)


def required_capability(request: web.Request) -> int | None:
    """The capability an endpoint needs; None for open paths and unknown methods
    (which the router then answers 405)."""
    path = request.path
    if path in OPEN_PATHS or path in SELF_CHECKED_PATHS or path.startswith(OPEN_PREFIX):
        return None
    if path in CONTROL_CAPABILITIES:
        return CONTROL_CAPABILITIES[path]
    return GATEWAY_CAPABILITIES.get(request.method)


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HeraldError(Status.UNAUTHORIZED, "expected 'Authorization: Bearer <token>'", "Authorization")
    return token.strip()


def authenticate(keys: AuthKeys, request: web.Request) -> Claims:
    """The request's verified claims (UNRESTRICTED for token-less requests under ``AA==``)."""
    token = _bearer(request)
    if token is None:
        if keys.allows_anonymous:
            return UNRESTRICTED
        raise HeraldError(Status.UNAUTHORIZED, "a bearer token is required (set BROKER_AUTH_TOKEN, "
                          "or mint one with `herald auth token`)", "Authorization")
    return keys.verify(token)


def authenticate_peer(peer_keys: AuthKeys | None, request: web.Request) -> Claims:
    """The claims of a broker's own REPLICATE token: never anonymous, never unchecked.

    ``peer_keys`` is None on an embedded broker (it has no peers): everyone is refused.
    """
    if peer_keys is None:
        raise HeraldError(Status.PERMISSION_DENIED, "peer endpoints serve the brokers of a cluster; "
                          "this broker runs embedded (no --etcd) and has no peers", "Authorization")
    token = _bearer(request)
    if token is None:
        raise HeraldError(Status.UNAUTHORIZED, "peer endpoints require a broker's own token", "Authorization")
    claims = peer_keys.verify(token)
    if not claims.allows(Capability.REPLICATE):
        raise HeraldError(Status.PERMISSION_DENIED, "the token lacks the REPLICATE capability", "Authorization")
    return claims


@web.middleware
async def auth_middleware(request: web.Request, handler):
    """Check the token and the endpoint's capability before the handler reads anything."""
    broker = request.app["broker"]
    if request.path in PEER_PATHS:
        request["claims"] = authenticate_peer(broker.peer_keys, request)
        request["capability"] = Capability.REPLICATE
        return await handler(request)
    keys: AuthKeys | None = broker.auth_keys
    capability = required_capability(request)
    if keys is None or capability is None:
        request["claims"] = UNRESTRICTED
        return await handler(request)
    claims = authenticate(keys, request)
    if not claims.allows(capability):
        raise HeraldError(Status.PERMISSION_DENIED,
                          f"the token lacks the {Capability(capability).name} capability",
                          "Authorization")
    request["claims"] = claims
    request["capability"] = capability
    return await handler(request)


def claims_of(request: web.Request) -> Claims:
    return request.get("claims", UNRESTRICTED)


def visible(claims: Claims, name: str, labels: LabelSet | None) -> bool:
    """Whether ``claims`` see journal ``name`` with spec ``labels`` (None: name only)."""
    if claims is UNRESTRICTED:
        return True
    return claims.sees(journal_meta_labels(labels or LabelSet(), name))


def authorize_journal(request: web.Request, name: str) -> None:
    """JOURNAL_NOT_FOUND unless the request's token sees ``name`` (as if it did not exist)."""
    claims = claims_of(request)
    if claims is UNRESTRICTED:
        return
    entry = request.app["broker"].keyspace.get(name)
    if not visible(claims, name, entry.spec.labels if entry else None):
        raise JournalNotFoundError(name)


def authorize_change(request: web.Request, name: str, labels: LabelSet | None, field: str) -> None:
    """PERMISSION_DENIED unless the token's selector covers the spec an apply writes
    (its new labels), or the name a delete removes: decided by the request alone."""
    if not visible(claims_of(request), name, labels):
        raise HeraldError(Status.PERMISSION_DENIED,
                          f"the token's selector does not cover journal {name}", field)


class PeerTokens:
    """Tokens a broker signs for itself, scoped to one journal and capability and
    cached for half their life (replication asks on every append group)."""

    def __init__(self, keys: AuthKeys, subject: str) -> None:
        self._keys, self._subject = keys, subject
        self._cache: dict[tuple[int, str], tuple[float, str]] = {}

    def headers(self, capability: int, journal: str) -> dict[str, str]:
        now = time.time()
        cached = self._cache.get((capability, journal))
        if cached is None or cached[0] - now < PEER_TOKEN_TTL_S / 2:
            selector = LabelSelector(include=LabelSet((Label("name", journal),)))
            token = self._keys.sign_for(capability, selector, PEER_TOKEN_TTL_S, self._subject, now)
            cached = self._cache[(capability, journal)] = (now + PEER_TOKEN_TTL_S, token)
        return {"Authorization": f"Bearer {cached[1]}"}

"""The route table: each HTTP endpoint declared once, next to its handler.

Each API module (``gateway``, ``control``, ``replication``) ends with a tuple of
`Endpoint` records and registers them with `add_endpoints`. The same records are
what ``/v1/openapi.json`` is generated from (`herald.broker.openapi`), so a route
cannot exist without being documented, nor be documented without existing:

    ENDPOINTS = (
        Endpoint("POST", "/v1/journals/list", handle_list, "journals",
                 request=wire.ListRequest, response=wire.ListResponse),
    )

    def add_routes(app):
        add_endpoints(app, ENDPOINTS)

Request and response models are frozen dataclasses (`herald.broker.wire`, or the
protocol's own), or a media type string for raw bodies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: Every endpoint registered on an app, in registration order (route order matters:
#: the gateway's ``/{journal}`` catches whatever was not matched before it).
ENDPOINTS_KEY = web.AppKey("herald_endpoints", list)


@dataclass(frozen=True, slots=True)
class Param:
    """A query parameter or header: its name, Python type (str, int, bool), meaning,
    and the values accepted (``enum`` if few, ``minimum`` for an integer)."""

    name: str
    description: str
    type: type = str
    required: bool = False
    enum: tuple[str, ...] = ()
    minimum: int | None = None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One method and path, its handler, and the shapes of what goes in and out.

    ``path`` is aiohttp's (``/{journal:.+}``); ``request`` and ``response`` are a
    dataclass (a JSON body), a media type (raw bytes), or None (no body).
    ``status`` is the success code; error codes come from ``HTTP_CODES``.
    """

    method: str
    path: str
    handler: Handler
    tag: str
    request: type | str | None = None
    response: type | str | None = None
    status: int = 200
    query: tuple[Param, ...] = ()
    headers: tuple[Param, ...] = ()
    response_headers: tuple[Param, ...] = ()
    response_media_types: tuple[str, ...] = ()  # more media types of the success body

    @property
    def summary(self) -> str:
        """The handler docstring's first line: the docs and the code say one thing."""
        doc = (self.handler.__doc__ or "").strip()
        return doc.splitlines()[0].strip() if doc else self.handler.__name__

    @property
    def description(self) -> str:
        doc = (self.handler.__doc__ or "").strip()
        return "\n".join(line.strip() for line in doc.splitlines()[1:]).strip()


def add_endpoints(app: web.Application, endpoints: Iterable[Endpoint]) -> None:
    """Register each endpoint's route and remember it for the OpenAPI document.

    Call before the app starts (aiohttp freezes it then).
    """
    registered = app.setdefault(ENDPOINTS_KEY, [])
    for endpoint in endpoints:
        app.router.add_route(endpoint.method, endpoint.path, endpoint.handler)
        registered.append(endpoint)


def registered_endpoints(app: web.Application) -> list[Endpoint]:
    return list(app.get(ENDPOINTS_KEY, []))

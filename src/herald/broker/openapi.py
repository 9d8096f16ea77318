"""``GET /v1/openapi.json``: the HTTP API's OpenAPI 3.1 document, generated.

Nothing here is written beside the code: paths, methods, parameters and summaries
come from the route table each API module registers (`herald.broker.endpoints`),
body schemas from the dataclasses handlers parse and answer with (the protocol's
`JournalSpec`, `Fragment`, `Label`, `Route`, `Change`, and `herald.broker.wire`),
and error responses from `Status` and its one `HTTP_CODES` table.

A dataclass becomes an object schema field by field: its type hint gives the JSON
type, a field without a default is required, enums are their names (numbers are
accepted on input too), a float field ending in ``_s`` is a duration (Go string or
seconds) named without the suffix. `WIRE_NAMES` and `CONSTRAINTS` hold the few
places where the protocol's JSON differs from its attribute names or where its
validation limits are worth stating; a test checks every schema against ``to_dict``.

    curl -s localhost:8080/v1/openapi.json | jq '.paths | keys'
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from typing import Any

import orjson
from aiohttp import web

from herald.broker.authz import OPEN_PATHS, OPEN_PREFIX, PEER_PATHS
from herald.broker.endpoints import Endpoint, add_endpoints, registered_endpoints
from herald.broker.wire import ErrorBody
from herald.keyspace.base import Change
from herald.protocol.errors import HTTP_CODES, Status
from herald.protocol.fragment import Fragment
from herald.protocol.journal import (
    MAX_FRAGMENT_LENGTH,
    MAX_JOURNAL_NAME_LEN,
    MAX_REPLICATION,
    MIN_FRAGMENT_LENGTH,
    MIN_JOURNAL_NAME_LEN,
    FragmentSpec,
    JournalSpec,
)
from herald.protocol.labels import MAX_NAME_LEN, MAX_VALUE_LEN, MIN_NAME_LEN, Label, LabelSet

OPENAPI_VERSION = "3.1.0"
INT64 = {"type": "integer", "minimum": -(1 << 63), "maximum": (1 << 63) - 1}
DURATION = {"anyOf": [{"type": "string", "description": "Go duration, e.g. `1m30s`"},
                      {"type": "number", "description": "seconds"}]}
JOURNAL_NAME = {"type": "string", "minLength": MIN_JOURNAL_NAME_LEN, "maxLength": MAX_JOURNAL_NAME_LEN,
                "description": "Letters, digits and `-_+/.=%`; a clean relative path."}

#: ``Authorization: Bearer <JWT>`` (docs/security.md). Optional as a whole — a broker
#: checks it only with ``--auth-keys`` — except on the peer endpoints, which always
#: need a broker's own token, and the open paths, which never look at one.
BEARER_AUTH = {"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
               "description": "A JWT with Gazette's claims (`cap`, `sel`, `exp`), HS256/HS384; "
                              "required by brokers run with --auth-keys (401 without a valid "
                              "token, 403 without the endpoint's capability)."}
OPTIONAL_BEARER = [{}, {"bearerAuth": []}]

#: Attribute → JSON key where the protocol's wire names differ (see each to_dict).
WIRE_NAMES: dict[type, dict[str, str]] = {
    Fragment: {"codec": "compression_codec", "store": "backing_store"},
}
#: Attributes that never travel as JSON (a selector-only flag).
NOT_ON_WIRE: dict[type, set[str]] = {Label: {"prefix"}}
#: The protocol's validation limits, stated in the schema.
CONSTRAINTS: dict[tuple[type, str], dict] = {
    (JournalSpec, "name"): JOURNAL_NAME,
    (JournalSpec, "replication"): {"minimum": 1, "maximum": MAX_REPLICATION},
    (JournalSpec, "max_append_rate"): {"minimum": 0, "description": "bytes per second; 0 = no limit"},
    (FragmentSpec, "length"): {"minimum": MIN_FRAGMENT_LENGTH, "maximum": MAX_FRAGMENT_LENGTH},
    (Label, "name"): {"minLength": MIN_NAME_LEN, "maxLength": MAX_NAME_LEN},
    (Label, "value"): {"maxLength": MAX_VALUE_LEN},
    (Change, "expect_mod_revision"): {"minimum": -1,
                                      "description": "0 = create, > 0 = compare-and-set, -1 = blind"},
    (Change, "delete"): JOURNAL_NAME,
}


class Schemas:
    """The ``components.schemas`` of one document: each dataclass once, by name."""

    def __init__(self) -> None:
        self.components: dict[str, dict] = {}

    def ref(self, model: type) -> dict:
        """``{"$ref": ...}`` to ``model``'s schema, adding it on first use."""
        name = model.__name__
        if name not in self.components:
            self.components[name] = {}  # placeholder: recursive models terminate
            self.components[name] = self._object(model)
        return {"$ref": f"#/components/schemas/{name}"}

    def _object(self, model: type) -> dict:
        hints = typing.get_type_hints(model)
        props, required = {}, []
        for f in dataclasses.fields(model):
            if f.name in NOT_ON_WIRE.get(model, ()):
                continue
            key, schema = self._property(model, f, hints[f.name])
            props[key] = schema
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(key)
        out = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            out["required"] = required
        if model.__doc__ and not model.__doc__.startswith(model.__name__ + "("):
            out["description"] = " ".join(model.__doc__.split())
        return out

    def _property(self, model: type, f: dataclasses.Field, hint: Any) -> tuple[str, dict]:
        key = WIRE_NAMES.get(model, {}).get(f.name, f.name)
        if hint is float and f.name.endswith("_s"):
            key, schema = f.name.removesuffix("_s"), dict(DURATION)
        else:
            schema = self.of(hint, optional_means_absent=f.default is not dataclasses.MISSING)
        schema.update(CONSTRAINTS.get((model, f.name), {}))
        schema.update(f.metadata.get("schema", {}))
        return key, {k: v for k, v in schema.items() if v != ""}

    def of(self, hint: Any, optional_means_absent: bool = False) -> dict:
        """The JSON schema of a type hint. ``X | None`` with a default means the key
        may be absent (not null); without one, the value may be null."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            inner = self.of(next(a for a in args if a is not type(None)))
            return inner if optional_means_absent else {"anyOf": [inner, {"type": "null"}]}
        if origin in (list, tuple):
            return {"type": "array", "items": self.of(args[0])}
        if hint is LabelSet:
            return {"type": "array", "items": self.ref(Label), "description": "labels, as [{name, value}]"}
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            values = [m.name for m in hint] + ([m.value for m in hint] if issubclass(hint, int) else [])
            return {"enum": values}
        if dataclasses.is_dataclass(hint):
            return self.ref(hint)
        return dict(_SCALARS[hint])


_SCALARS = {str: {"type": "string"}, bool: {"type": "boolean"}, int: INT64, float: {"type": "number"},
            dict: {"type": "object"}}
_PATH_PARAM = re.compile(r"\{(\w+)(:[^}]*)?\}")


def _param(location: str, p) -> dict:
    schema = dict(_SCALARS[p.type])
    if p.type is bool:  # gateway.bool_param; letter case is ignored
        schema = {"type": "string", "enum": ["true", "false", "1", "0", ""]}
    if p.enum:
        schema["enum"] = list(p.enum)
    if p.minimum is not None:
        schema["minimum"] = p.minimum
    return {"name": p.name, "in": location, "required": p.required, "description": p.description,
            "schema": schema}


def _body(model: type | str, schemas: Schemas) -> dict:
    if isinstance(model, str):  # raw bytes, or a JSON document with no model of its own
        schema = {"type": "object"} if model.endswith("json") else {"type": "string", "format": "binary"}
        return {model: {"schema": schema}}
    return {"application/json": {"schema": schemas.ref(model)}}


def error_responses(schemas: Schemas) -> dict[str, dict]:
    """``components.responses``: one per HTTP code any Status maps to, naming those
    statuses, each with the `ErrorBody` schema."""
    by_code: dict[int, list[str]] = {}
    for status, code in HTTP_CODES.items():
        if status is not Status.OK:
            by_code.setdefault(code, []).append(status.name)
    body = {"application/json": {"schema": schemas.ref(ErrorBody)}}
    return {f"Error{code}": {"description": "Error: " + ", ".join(names), "content": body}
            for code, names in sorted(by_code.items())}


def _error_refs(responses: dict[str, dict], with_body: bool) -> dict[str, dict]:
    """An operation's error responses: references, or (HEAD) bodiless copies."""
    return {name.removeprefix("Error"): ({"$ref": f"#/components/responses/{name}"} if with_body
                                         else {"description": response["description"]})
            for name, response in responses.items()}


def operation(endpoint: Endpoint, schemas: Schemas, errors: dict[str, dict]) -> dict:
    """The OpenAPI operation object of one endpoint."""
    with_body = endpoint.method != "HEAD"
    params = [{"name": name, "in": "path", "required": True, "schema": dict(JOURNAL_NAME)}
              for name, _ in _PATH_PARAM.findall(endpoint.path)]
    params += [_param("query", p) for p in endpoint.query]
    params += [_param("header", p) for p in endpoint.headers]
    success: dict[str, Any] = {"description": endpoint.summary}
    if endpoint.response is not None and with_body:
        success["content"] = _body(endpoint.response, schemas)
        for media_type in endpoint.response_media_types:
            success["content"][media_type] = {"schema": {"type": "string"}}
    if endpoint.response_headers:
        success["headers"] = {p.name: {"description": p.description, "schema": dict(_SCALARS[p.type])}
                              for p in endpoint.response_headers}
    op: dict[str, Any] = {
        "operationId": f"{endpoint.tag}.{endpoint.handler.__name__.removeprefix('handle_')}",
        "summary": endpoint.summary, "tags": [endpoint.tag], "parameters": params,
        "responses": {str(endpoint.status): success, **_error_refs(errors, with_body)},
    }
    if endpoint.path in OPEN_PATHS or endpoint.path.startswith(OPEN_PREFIX):
        op["security"] = []
    elif endpoint.path in PEER_PATHS:
        op["security"] = [{"bearerAuth": []}]
    if endpoint.description:
        op["description"] = endpoint.description
    if endpoint.request is not None:
        op["requestBody"] = {"required": isinstance(endpoint.request, str),
                             "content": _body(endpoint.request, schemas)}
    return op


def openapi_path(path: str) -> str:
    """aiohttp's ``/{journal:.+}`` as OpenAPI's ``/{journal}``."""
    return _PATH_PARAM.sub(lambda m: "{" + m[1] + "}", path)


def document(endpoints: list[Endpoint], server_url: str = "") -> dict:
    """The whole OpenAPI document for ``endpoints`` (pure: the same table, the same doc)."""
    schemas = Schemas()
    errors = error_responses(schemas)
    paths: dict[str, dict] = {}
    for endpoint in endpoints:
        op = operation(endpoint, schemas, errors)
        paths.setdefault(openapi_path(endpoint.path), {})[endpoint.method.lower()] = op
    doc = {"openapi": OPENAPI_VERSION,
           "info": {"title": "Herald broker", "version": _version(),
                    "description": "Gazette's journal brokers over HTTP. Request bodies are taken "
                                   "raw: any Content-Encoding but identity is refused with 415."},
           "security": OPTIONAL_BEARER, "paths": paths,
           "components": {"schemas": schemas.components, "responses": errors,
                          "securitySchemes": {"bearerAuth": BEARER_AUTH}}}
    if server_url:
        doc["servers"] = [{"url": server_url}]
    return doc


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("herald")
    except PackageNotFoundError:
        return "0"


async def handle_openapi(request: web.Request) -> web.Response:
    """This document: the broker's HTTP API as OpenAPI 3.1 JSON.

    Generated from the route table and the models the handlers use.
    """
    cache = request.app[_DOC_KEY]
    if "json" not in cache:  # the route table is frozen once the app runs: build once
        cache["json"] = orjson.dumps(document(registered_endpoints(request.app)))
    return web.Response(body=cache["json"], content_type="application/json")


_DOC_KEY = web.AppKey("herald_openapi_doc", dict)

ENDPOINTS = (Endpoint("GET", "/v1/openapi.json", handle_openapi, "meta", response="application/json"),)


def add_routes(app: web.Application) -> None:
    """Register ``/v1/openapi.json`` (before the gateway's catch-all ``/{journal}``)."""
    app[_DOC_KEY] = {}
    add_endpoints(app, ENDPOINTS)

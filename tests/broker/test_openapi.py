"""``/v1/openapi.json`` is a valid OpenAPI 3.1 document generated from the route table
and the models the handlers use: every route is in it, and what the protocol's
``to_dict`` writes validates against the schema derived for it."""

from __future__ import annotations

import httpx
import jsonschema
import openapi_spec_validator
import pytest

from herald.broker.endpoints import registered_endpoints
from herald.broker.openapi import document, openapi_path
from herald.broker.server import make_app
from herald.broker.service import Broker
from herald.broker.settings import BrokerSettings
from herald.keyspace.base import Change
from herald.keyspace.routes import MemberId, Route
from herald.protocol.errors import (
    HTTP_CODES,
    JournalNotFoundError,
    OffsetNotYetAvailableError,
    RegisterMismatchError,
    Status,
    ValidationError,
)
from herald.protocol.fragment import Fragment
from herald.protocol.journal import (
    CompressionCodec,
    FragmentSpec,
    JournalFlags,
    JournalSpec,
    JournalSuspend,
    SuspendLevel,
)
from herald.protocol.labels import LabelSet
from herald.testing import seed_journal


@pytest.fixture
def app(tmp_path):
    return make_app(Broker(BrokerSettings(data_dir=tmp_path)))


@pytest.fixture
def doc(app):
    return document(registered_endpoints(app))


def test_the_served_document_is_valid_openapi_and_generated_from_the_route_table(broker, doc):
    served = httpx.get(f"{broker.url}/v1/openapi.json", timeout=30)

    assert served.status_code == 200
    assert served.headers["Content-Type"].startswith("application/json")
    openapi_spec_validator.validate(served.json())
    assert served.json() == doc


def test_every_route_of_the_app_is_documented_and_nothing_else(app, doc):
    routes = {(r.method, openapi_path(r.resource.canonical)) for r in app.router.routes()}
    documented = {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}
    assert routes == documented
    assert ("PUT", "/{journal}") in documented and ("GET", "/v1/openapi.json") in documented


def test_bearer_auth_is_declared_optional_but_required_by_peers_and_absent_on_open_paths(doc):
    scheme = doc["components"]["securitySchemes"]["bearerAuth"]
    assert (scheme["type"], scheme["scheme"], scheme["bearerFormat"]) == ("http", "bearer", "JWT")
    assert doc["security"] == [{}, {"bearerAuth": []}]  # checked only with --auth-keys
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            opened = ("/v1/openapi.json", "/debug/metrics", "/metrics", "/healthz", "/readyz", "/~status/{name}")
            expected = {**{p: [] for p in opened},
                        "/v1/replicate/sync": [{"bearerAuth": []}],
                        "/v1/replicate/stream": [{"bearerAuth": []}]}.get(path)
            assert op.get("security") == expected, (method, path)
            if path not in opened:
                assert {"401", "403"} <= set(op["responses"]), (method, path)


def test_every_error_status_has_its_http_code_on_every_operation(doc):
    codes = {str(code) for status, code in HTTP_CODES.items() if status is not Status.OK}
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            assert codes <= set(op["responses"]), f"{method} {path}"
    described = " ".join(r["description"] for r in doc["components"]["responses"].values())
    assert all(s.name in described for s in Status if s is not Status.OK)


def validate(doc: dict, model: str, instance) -> None:
    """Validate ``instance`` against ``#/components/schemas/<model>`` of ``doc``."""
    schema = {"$ref": f"#/components/schemas/{model}", "components": doc["components"]}
    jsonschema.Draft202012Validator(schema).validate(instance)


FULL_SPEC = JournalSpec(
    name="a/full/spec", replication=3, labels=LabelSet.of("content-type", "text/csv", "owner", "x"),
    fragment=FragmentSpec(length=1 << 20, compression_codec=CompressionCodec.GZIP,
                          stores=("s3://bucket/p/",), refresh_interval_s=60, retention_s=3600,
                          flush_interval_s=600, path_postfix_template="date={{.Spool.FirstAppendTime}}"),
    flags=JournalFlags.O_RDWR, max_append_rate=1000, suspend=JournalSuspend(SuspendLevel.PARTIAL, 7))
FULL_FRAGMENT = Fragment("a/full/spec", 0, 10, "ab" * 20, CompressionCodec.GZIP, "s3://bucket/p/",
                         1700000000.5, "date=2024")


@pytest.mark.parametrize("model, instance", [
    ("JournalSpec", FULL_SPEC.to_dict()),
    ("JournalSpec", JournalSpec("a/minimal").to_dict()),
    ("Fragment", FULL_FRAGMENT.to_dict()),
    ("Route", Route((MemberId("z", "a"), MemberId("z", "b")), 0, ("http://a", "http://b")).to_dict()),
    ("Change", Change(-1, upsert=FULL_SPEC).to_dict()),
    ("Change", Change(5, delete="a/full/spec").to_dict()),
    ("ErrorBody", ValidationError("changes[0].upsert.name", "bad").to_dict()),
    ("ErrorBody", JournalNotFoundError("a/b/c").to_dict()),
    ("ErrorBody", RegisterMismatchError("no", LabelSet.of("owner", "me")).to_dict()),
    ("ErrorBody", OffsetNotYetAvailableError("later", write_head=10).to_dict()),
])
def test_what_the_protocol_writes_validates_against_the_derived_schema(doc, model, instance):
    validate(doc, model, instance)


def test_a_full_spec_uses_every_documented_field(doc):
    """The schema's keys are exactly the ones to_dict writes (none invented, none missing)."""
    spec_props = doc["components"]["schemas"]["JournalSpec"]["properties"]
    fragment_props = doc["components"]["schemas"]["FragmentSpec"]["properties"]
    assert set(spec_props) == set(FULL_SPEC.to_dict())
    assert set(fragment_props) == set(FULL_SPEC.fragment.to_dict())
    assert set(doc["components"]["schemas"]["Fragment"]["properties"]) == set(FULL_FRAGMENT.to_dict())


def test_real_responses_validate_against_their_documented_schemas(broker, doc):
    seed_journal(broker, "openapi/journal")
    with broker.client() as http:
        listed = http.post("/v1/journals/list", json={"selector": "prefix=openapi/"}).json()
        appended = http.post("/v1/journals/append", params={"journal": "openapi/journal"}, content=b"x\n")
        fragments = http.post("/v1/journals/fragments", json={"journal": "openapi/journal"}).json()
        members = http.post("/v1/members/list", json={}).json()
        refused = http.post("/v1/journals/list", json={"watch": "yes"})
    validate(doc, "ListResponse", listed)
    validate(doc, "AppendResponse", appended.json())
    validate(doc, "FragmentsResponse", fragments)
    validate(doc, "MembersResponse", members)
    assert refused.status_code == 400 and refused.json()["field"] == "watch"
    validate(doc, "ErrorBody", refused.json())


@pytest.mark.parametrize("path, body, field", [
    ("/v1/journals/list", {"selector": "", "colour": "blue"}, "colour"),
    ("/v1/journals/prune", {"journal": "openapi/journal", "dry_run": "false"}, "dry_run"),
    ("/v1/journals/fragments", {"journal": "openapi/journal", "page_limit": 2.5}, "page_limit"),
    ("/v1/members/list", {"x": 1}, "x"),
])
def test_a_body_key_or_type_the_model_does_not_declare_is_refused(broker, path, body, field):
    seed_journal(broker, "openapi/journal")
    resp = httpx.post(f"{broker.url}{path}", json=body, timeout=30)
    assert resp.status_code == 400, resp.text
    assert resp.json()["field"] == field
    with broker.client() as http:  # a string "false" used to prune for real
        assert http.get("/openapi/journal").content == b"seed\n"

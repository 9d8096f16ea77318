"""Schemathesis fuzz of every operation in ``/v1/openapi.json`` against a real broker.

Each operation gets ``MAX_EXAMPLES`` valid and ``MAX_EXAMPLES`` invalid requests
(per the document), and the journal operations as many again aimed at a journal
that exists. For every request: no 5xx, no traceback in the body, the status and
body are the documented ones, and a refused (4xx) request leaves every journal's
spec, content and write head as they were [I-APPLY-1] [I-APPEND-2]. After each
operation the broker is still alive and answering, and has logged no traceback.

Random specs are almost never valid, so the success paths of apply and prune get
their own ``SUCCESS_EXAMPLES`` requests from strategies of valid bodies aimed at
the seeded journal: each must succeed (an apply's spec is then what is listed).
"""

from __future__ import annotations

import collections

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from herald.broker import control, gateway, health, openapi, replication, status_page
from herald.broker.openapi import openapi_path
from herald.broker.status_page import reports
from herald.protocol.journal import JournalSpec
from herald.testing import BrokerProcess, journal_spec, journals_state, seed_journal

MAX_EXAMPLES = 25
SUCCESS_EXAMPLES = 10
NAME = "fuzz/journal"
OPERATIONS = [f"{e.method} {openapi_path(e.path)}"
              for table in (openapi.ENDPOINTS, control.ENDPOINTS, replication.ENDPOINTS, gateway.ENDPOINTS,
                            health.ENDPOINTS, status_page.ENDPOINTS, reports.ENDPOINTS)
              for e in table] + ["GET /debug/metrics", "GET /metrics"]
#: How each operation is pointed at the seeded journal, besides random names.
AT_JOURNAL = {"path_parameters": {"journal": NAME}}
AT_JOURNAL_QUERY = {"query": {"journal": NAME}}
#: Not the peer endpoints: an embedded broker refuses them all before reading anything
#: (their validation is tested with a peer's credentials in test_hostile_specs).
EXISTING = {"PUT /{journal}": AT_JOURNAL, "GET /{journal}": AT_JOURNAL, "HEAD /{journal}": AT_JOURNAL,
            "POST /v1/journals/append": AT_JOURNAL_QUERY}
CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]
REQUESTS: collections.Counter = collections.Counter()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("fuzz")).start()
    seed_journal(proc, NAME)
    yield proc
    proc.kill()
    print("\nfuzz requests per operation:", dict(sorted(REQUESTS.items())),
          "total:", sum(REQUESTS.values()))


@pytest.fixture(scope="module")
def doc(served) -> dict:
    return httpx.get(f"{served.url}/v1/openapi.json", timeout=30).json()


@pytest.fixture(scope="module")
def schema(doc):
    # from_dict, not from_url: from_url leaves the document's own path unfuzzed.
    return schemathesis.openapi.from_dict(doc)


def modes(doc: dict, method: str, path: str) -> list[GenerationMode]:
    """Invalid requests need something to make invalid: parameters or a body."""
    op = doc["paths"][path][method.lower()]
    has_input = op["parameters"] or "requestBody" in op
    return [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if has_input else [])


def bounded(case) -> None:
    """Keep requests that would stream until the client leaves from doing so: a list
    watch and a blocking read are covered by their own tests, not by the fuzz."""
    if isinstance(case.body, dict) and case.body.get("watch") is True:
        case.body["watch"] = False
    if case.query and case.query.get("block") in ("true", "1", True):
        case.query["block"] = "false"


def send_and_check(served: BrokerProcess, case) -> int:
    bounded(case)
    before = journals_state(served.url)
    response = case.call(base_url=served.url, timeout=30)
    REQUESTS[case.operation.label] += 1
    repro = f"{case.operation.label} -> {response.status_code}: {response.content[:300]!r}"
    assert response.status_code < 500, repro
    assert b"Traceback" not in response.content, repro
    case.validate_response(response, checks=CHECKS)
    if 400 <= response.status_code < 500:
        assert journals_state(served.url) == before, repro
    return response.status_code


def fuzz(served, operation, mode: GenerationMode, **fixed) -> collections.Counter:
    statuses: collections.Counter = collections.Counter()

    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, verbosity=Verbosity.quiet,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode, **fixed))
    def run(case):
        statuses[send_and_check(served, case)] += 1

    run()
    return statuses


def assert_alive_and_unharmed(served: BrokerProcess) -> None:
    assert served.proc.poll() is None, "the broker died"
    with served.client() as http:
        assert http.head(f"/{NAME}").status_code == 200
        assert http.post("/v1/journals/list", json={}).status_code == 200
    assert not any("Traceback" in line for line in served.stderr_lines), "".join(served.stderr_lines[-40:])


def test_the_fuzz_covers_every_documented_operation(schema):
    served_ops = {op.ok().label for op in schema.get_all_operations()}
    assert served_ops == set(OPERATIONS)


@pytest.mark.parametrize("label", OPERATIONS)
def test_fuzzed_requests_get_documented_4xx_or_success_and_change_nothing_when_refused(
        served, doc, schema, label):
    method, path = label.split(" ", 1)
    operation = schema[path][method]
    statuses = collections.Counter()
    for mode in modes(doc, method, path):
        statuses += fuzz(served, operation, mode)
        if label in EXISTING:
            statuses += fuzz(served, operation, mode, **EXISTING[label])
    # The fuzz really ran (an operation without inputs has just one distinct request).
    assert sum(statuses.values()) >= (MAX_EXAMPLES if len(modes(doc, method, path)) > 1 else 1), statuses
    print(f"\n{label}: {sum(statuses.values())} requests, statuses {dict(sorted(statuses.items()))}")
    assert_alive_and_unharmed(served)


# -- success paths: valid applies and prunes of the seeded journal ------------------------

TOKEN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=2, max_size=12)
DURATION = st.sampled_from(["24h0m0s", "720h0m0s", "1h30m0s", 86400, 0])


@st.composite
def valid_specs(draw, name: str) -> dict:
    """A valid variation of the seeded spec (its store and content-type kept, so the
    journal stays readable, and no append rate cap to slow the rest of the suite)."""
    doc = journal_spec(name, length=draw(st.integers(1 << 10, 1 << 30)),
                       compression_codec=draw(st.sampled_from(["NONE", "GZIP", "ZSTANDARD", "SNAPPY"])),
                       refresh_interval=draw(st.sampled_from(["1m0s", "5m0s", 30])),
                       retention=draw(DURATION), flush_interval=draw(DURATION))
    extra = draw(st.dictionaries(TOKEN.filter(lambda t: t[0].isalpha() and t != "content-type"),
                                 TOKEN, max_size=3))
    doc["labels"] += [{"name": k, "value": v} for k, v in sorted(extra.items())]
    return doc


@st.composite
def valid_applies(draw) -> dict:
    changes = [{"upsert": draw(valid_specs(NAME)), "expect_mod_revision": -1}]
    if draw(st.booleans()):  # and a journal of its own, created or updated
        changes.append({"upsert": draw(valid_specs(f"fuzz/extra-{draw(st.integers(0, 3))}")),
                        "expect_mod_revision": -1})
    return {"changes": changes}


def listed_spec(url: str, name: str) -> dict:
    doc = httpx.post(f"{url}/v1/journals/list", json={"selector": f"name={name}"}, timeout=30).json()
    return doc["journals"][0]["spec"]


def test_valid_applies_and_prunes_of_the_seeded_journal_succeed(served, schema):
    apply_op, prune_op = schema["/v1/journals/apply"]["POST"], schema["/v1/journals/prune"]["POST"]

    @settings(max_examples=SUCCESS_EXAMPLES, deadline=None, database=None, verbosity=Verbosity.quiet,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(body=valid_applies(), prune=st.fixed_dictionaries({"journal": st.just(NAME), "dry_run": st.booleans()}))
    def run(body, prune):
        case = apply_op.Case(body=body, media_type="application/json")
        assert send_and_check(served, case) == 200, body
        for change in body["changes"]:
            expected = JournalSpec.from_dict(change["upsert"]).to_dict()
            assert listed_spec(served.url, change["upsert"]["name"]) == expected
        assert send_and_check(served, prune_op.Case(body=prune, media_type="application/json")) == 200, prune

    run()
    assert REQUESTS["POST /v1/journals/apply"] >= SUCCESS_EXAMPLES  # the success path really ran
    assert_alive_and_unharmed(served)

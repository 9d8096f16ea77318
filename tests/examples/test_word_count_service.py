"""The word-count query service against a real broker: it serves the latest
*committed* count of each bigram, and answers bad queries with 400 naming the field."""

from __future__ import annotations

import httpx
import pytest

from herald.client import BrokerClient
from herald.examples.word_count.journals import ensure_journals
from herald.testing import BrokerProcess, Producer, wait_until
from tests.examples.word_count_helpers import QueryService


@pytest.fixture(scope="module")
def broker_url(tmp_path_factory):
    """One broker for the module: every test here only reads what the fixture wrote."""
    root = tmp_path_factory.mktemp("word-count-service")
    proc = BrokerProcess(root / "data", root / "fragments").start()
    yield proc.url
    proc.kill()


@pytest.fixture(scope="module")
def service(broker_url):
    with BrokerClient(broker_url, timeout_s=30) as client:
        ensure_journals(client, 2)
        producer = Producer(client)
        # A bigram's updates all come from one journal, in commit order, as the job
        # maps them by bigram: the model keeps the last one read. (With "the city"
        # in two journals, which count won depended on which follower read last.)
        producer.committed("word-count/counts/part-000", {"bigram": "the cat", "count": 2})
        producer.committed("word-count/counts/part-001", {"bigram": "the city", "count": 1},
                           {"bigram": "a city", "count": 4}, {"bigram": "the city", "count": 7},
                           {"count": "not a count message"})
        pending = Producer(client)  # An open transaction: never acknowledged, never served.
        pending.uncommitted("word-count/counts/part-000", {"bigram": "the city", "count": 99},
                            {"bigram": "the end", "count": 1})
        heads = {name: client.write_head(name) for name in ("word-count/counts/part-000",
                                                           "word-count/counts/part-001")}
    svc = QueryService(broker_url).start()
    wait_until(lambda: all(svc.read_through()[j] >= head for j, head in heads.items()),
               "the service to read both count journals")
    yield svc
    svc.kill()


def test_a_bigram_is_its_latest_committed_count(service):
    assert service.get("/api/bigram", w1="The", w2="City").json() == \
        {"bigram": "the city", "w1": "the", "w2": "city", "count": 7}
    assert service.get("/api/bigram", w1="the", w2="end").json()["count"] == 0  # Uncommitted.
    assert service.get("/api/bigram", w1="no", w2="such").json()["count"] == 0


def test_a_prefix_lists_bigrams_in_order_with_a_limit(service):
    doc = service.get("/api/bigrams", prefix="the c").json()
    assert doc == {"prefix": "the c", "truncated": False,
                   "bigrams": [{"bigram": "the cat", "count": 2}, {"bigram": "the city", "count": 7}]}
    assert service.get("/api/bigrams", prefix="", limit="2").json()["truncated"] is True
    status = service.get("/api/status").json()
    assert status["bigrams"] == 3 and status["journals"]["word-count/counts/part-001"]["bad_messages"] == 1


@pytest.mark.parametrize(("path", "query", "field"), [
    ("/api/bigram", "w1=the", "w2"),
    ("/api/bigram", "w2=the", "w1"),
    ("/api/bigram", "w1=the&w2=big%20city", "w2"),
    ("/api/bigram", "w1=&w2=city", "w1"),
    ("/api/bigram", "w1=the&w2=city&w2=sea", "w2"),
    ("/api/bigram", "w1=the&w2=%FF%FE", "w2"),
    ("/api/bigram", "w1=" + "a" * 500 + "&w2=city", "w1"),
    ("/api/bigram", "w1=the&w2=city&admin=1", "admin"),
    ("/api/bigrams", "", "prefix"),
    ("/api/bigrams", "prefix=the&limit=ten", "limit"),
    ("/api/bigrams", "prefix=the&limit=0", "limit"),
    ("/api/bigrams", "prefix=the&limit=99999999999999999999999", "limit"),
    ("/api/bigrams", "prefix=the&limit=-1", "limit"),
    ("/api/bigrams", "prefix=a%00b", "prefix"),
    ("/api/bigrams", "prefix=" + "x" * 300, "prefix"),
    ("/api/bigrams", "prefix=" + "x" * 5000, "query"),
    ("/api/status", "verbose=1", "verbose"),
])
def test_a_bad_query_is_a_400_naming_the_field(service, path, query, field):
    resp = httpx.get(f"{service.url}{path}?{query}", timeout=30)
    assert resp.status_code == 400, resp.text
    assert resp.json()["status"] == "INVALID_ARGUMENT" and resp.json()["field"] == field, resp.text


def test_hostile_requests_get_4xx_and_the_service_keeps_answering(service):
    huge = httpx.get(f"{service.url}/api/bigrams?prefix={'y' * 20000}", timeout=30)
    assert 400 <= huge.status_code < 500
    assert httpx.post(f"{service.url}/api/bigrams", content=b"x" * 100_000, timeout=30).status_code == 405
    assert httpx.get(f"{service.url}/api/nothing", timeout=30).status_code == 404
    assert service.get("/api/bigram", w1="the", w2="city").json()["count"] == 7

"""A request forwarded to a broker that stops answering is abandoned once the route
moves away from it (real brokers, real etcd).

A stopped broker (SIGSTOP, a hung VM) keeps its connections open and answers
nothing; until its lease expires nobody can tell it from a slow one. Once the
allocator has moved the journal on, a broker that forwarded a client's append there
answers 503 (retry) instead of holding the client for its whole timeout.
"""

from __future__ import annotations

import os
import signal

import httpx
import pytest

from herald.testing import apply_specs, journal_spec
from tests.broker.test_cluster import _append_until_accepted, member_key, wait_for_route
from tests.broker.test_cluster import cluster as cluster_fixture

cluster = cluster_fixture  # three brokers over one etcd (the fixture test_cluster uses)

pytestmark = pytest.mark.slow

CLIENT_TIMEOUT_S = 60  # far beyond the 4 s lease: a hang shows as a timeout, not a 503


def test_append_forwarded_to_a_stopped_primary_is_answered_retry_once_the_route_moves(cluster):
    urls = {key: b.url for key, b in cluster.items()}
    apply_specs(next(iter(urls.values())), dict(journal_spec("proxy/journal"), replication=2))
    route = wait_for_route(next(iter(urls.values())), "proxy/journal", 2)
    primary, replica = (member_key(m) for m in route["members"])
    (outsider,) = set(urls) - {primary, replica}
    journal_url = f"{urls[outsider]}/proxy/journal"
    assert httpx.put(journal_url, content=b"before\n", timeout=30).status_code == 204  # forwarded
    os.killpg(cluster[primary].proc.pid, signal.SIGSTOP)
    try:
        try:
            resp = httpx.put(journal_url, content=b"during\n", timeout=CLIENT_TIMEOUT_S)
        except httpx.TimeoutException:
            pytest.fail(f"the forwarded append hung for {CLIENT_TIMEOUT_S}s after its primary stopped")
        assert resp.status_code == 503, resp.text + "".join(cluster[outsider].stderr_lines[-40:])
        assert "retry" in resp.text
    finally:
        os.killpg(cluster[primary].proc.pid, signal.SIGCONT)
    after = _append_until_accepted(journal_url, b"after\n")
    content = httpx.get(journal_url, params={"block": "true", "end_offset": after.headers["X-Commit-End"]},
                        timeout=60).content
    assert content.startswith(b"before\n") and content.endswith(b"after\n")

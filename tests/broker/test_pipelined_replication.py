"""A replicating primary pipelines its groups (herald.broker.primary_pipeline): with
many writers several groups are in flight at once. A replica killed mid-stream must
fail the group it failed and every later one in flight, so every acknowledged byte
is in the journal where its acknowledgement said, and no offset is acknowledged
twice
[I-APPEND-3] [I-APPEND-2]."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from herald.testing import apply_specs, journal_spec
from tests.broker.acked_writers import AckedWriters
from tests.broker.test_cluster import cluster, member_key, wait_for_route, whole_journal

__all__ = ["cluster"]  # the fixture, shared with test_cluster

pytestmark = pytest.mark.slow
WRITERS = 8


def test_kill_9_of_a_replica_under_concurrent_writers_loses_no_acknowledged_byte(cluster):
    urls = [b.url for b in cluster.values()]
    # Two replicas of three brokers: when the peer dies, the spare joins the peerset
    # (a peerset short of `replication` may refuse appends until one does).
    apply_specs(urls[0], dict(journal_spec("pipelined/journal"), replication=2))
    route = wait_for_route(urls[0], "pipelined/journal", 2)
    primary = cluster[member_key(route["members"][0])]
    victim = cluster[member_key(route["members"][1])]
    with AckedWriters(f"{primary.url}/pipelined/journal", WRITERS) as writers:
        writers.wait_for(200, 60, "appends did not start")  # the pipeline full before the crash
        victim.kill()
        # Resumed once the spare replaced the dead replica.
        writers.wait_for(len(writers.acked) + 200, 45, "appends did not resume after the replica died")
    acked = writers.acked
    # A group acknowledged after an earlier one failed would be missing here: the
    # primary rolled back over it and later groups took its offsets [I-APPEND-2].
    expected = whole_journal(primary.url, "pipelined/journal")
    for begin, body in acked:
        assert expected[begin:begin + len(body)] == body
    assert len({begin for begin, _ in acked}) == len(acked)  # no two acks for one offset


def _append_all(url: str, bodies: list[bytes]) -> list[tuple[int, bytes]]:
    """Append ``bodies`` one after another (one writer); each acknowledged offset."""
    acked = []
    with httpx.Client(timeout=30) as http:
        for body in bodies:
            resp = http.put(url, content=body)
            assert resp.status_code == 204, resp.text
            acked.append((int(resp.headers["X-Commit-Begin"]), body))
    return acked


def test_a_lone_writer_after_32_is_acknowledged_without_waiting_for_appends_that_never_come(cluster):
    # When 32 writers drop to 1 while their last groups are in flight, the lone
    # writer's next group must go out once they settle, never wait for appends that
    # never come (a guard for any gathering of groups behind those in flight).
    urls = [b.url for b in cluster.values()]
    apply_specs(urls[0], dict(journal_spec("pipelined/drop"), replication=3))
    route = wait_for_route(urls[0], "pipelined/drop", 3)
    url = f"{cluster[member_key(route['members'][0])].url}/pipelined/drop"
    acked: list[tuple[int, bytes]] = []
    with ThreadPoolExecutor(32) as pool:
        for burst in range(3):
            # Writer 0 goes on alone after the other 31 end, while their last groups are in flight.
            lone = pool.submit(_append_all, url, [f"b{burst} w0 r{i}\n".encode() for i in range(30)])
            others = [pool.submit(_append_all, url, [f"b{burst} w{n} r{i}\n".encode() for i in range(5)])
                      for n in range(1, 32)]
            acked += [pair for writer in [*others, lone] for pair in writer.result()]
    journal = whole_journal(url.rsplit("/pipelined", 1)[0], "pipelined/drop")
    assert len(journal) == sum(len(body) for _, body in acked)
    for begin, body in acked:
        assert journal[begin:begin + len(body)] == body
    assert {whole_journal(b.url, "pipelined/drop") for b in cluster.values()} == {journal}

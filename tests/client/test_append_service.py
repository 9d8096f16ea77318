"""AppendService: batching, per-journal order, slots, retries; WatchedList."""

from __future__ import annotations

import concurrent.futures as cf

import pytest

from herald.client import AppendService, BrokerClient, WatchedList
from herald.protocol.errors import JournalNotFoundError, ValidationError
from tests.client.client_helpers import DEADLINE_S, create, metric

PUTS = "herald_broker_append_seconds_count"


def read_all(client: BrokerClient, journal: str) -> bytes:
    return b"".join(c for _, c in client.read(journal)) if client.write_head(journal) else b""


def test_many_small_appends_become_few_puts_in_order(client):
    create(client, "a/batched")
    records = [b'{"i": %d}\n' % i for i in range(3000)]
    puts_before = metric(client, PUTS)
    with AppendService(client, linger_s=0.01) as service:
        futures = [service.append("a/batched", r) for r in records]
        service.flush(DEADLINE_S)
        results = [f.result(DEADLINE_S) for f in futures]
    puts = metric(client, PUTS) - puts_before
    assert read_all(client, "a/batched") == b"".join(records)  # per-journal order kept.
    assert puts == service.statistics()["batches"] == len({r.begin for r in results})
    assert puts <= len(records) / 20, f"{puts} PUTs for {len(records)} appends"
    # Each record lies inside the commit its future reports.
    assert results[-1].end == len(b"".join(records))


def test_batches_seal_at_max_batch_bytes(client):
    create(client, "a/sized")
    with AppendService(client, max_batch_bytes=1000, linger_s=1.0) as service:
        futures = [service.append("a/sized", b"x" * 99 + b"\n") for _ in range(30)]
        service.flush(DEADLINE_S)
    sizes = {(f.result().begin, f.result().end) for f in futures}
    assert all(end - begin == 1000 for begin, end in sizes)
    assert len(sizes) == 3


def test_concurrent_writers_keep_each_slot_hold_contiguous(client):
    create(client, "a/slots")
    create(client, "b/slots")
    with AppendService(client) as service:
        def writer(w: int) -> None:
            for i in range(200):
                journal = "a/slots" if i % 2 else "b/slots"
                with service.start_append(journal) as slot:
                    for part in (b"<%d:%d" % (w, i), b"|", b">\n"):  # several writes, one record
                        slot.write(part)

        with cf.ThreadPoolExecutor(8) as pool:
            list(pool.map(writer, range(8)))
        service.flush(DEADLINE_S)
    for journal in ("a/slots", "b/slots"):
        lines = read_all(client, journal).splitlines()
        assert len(lines) == 8 * 100
        assert all(line.startswith(b"<") and line.endswith(b"|>") for line in lines)
        for w in range(8):  # each writer's records keep their order.
            mine = [int(line[1:-2].split(b":")[1]) for line in lines if line.startswith(b"<%d:" % w)]
            assert mine == sorted(mine)


def test_a_slot_that_raises_writes_nothing(client):
    create(client, "a/slots")
    with AppendService(client) as service:
        with pytest.raises(RuntimeError):
            with service.start_append("a/slots") as slot:
                slot.write(b"half a rec")
                raise RuntimeError("publisher failed mid-message")
        service.append("a/slots", b"whole\n").result(DEADLINE_S)
    assert read_all(client, "a/slots") == b"whole\n"


def test_a_failure_is_not_cached_later_batches_succeed(client):
    """Gazette issue #462: one failed batch must not poison the journal's service."""
    with AppendService(client) as service:
        with pytest.raises(JournalNotFoundError):
            service.append("a/later", b"lost\n").result(DEADLINE_S)
        create(client, "a/later")
        assert service.append("a/later", b"kept\n").result(DEADLINE_S).end == 5
    assert read_all(client, "a/later") == b"kept\n"


@pytest.mark.parametrize("own_connections", [False, True], ids=["client", "connection-per-journal"])
def test_appends_retry_across_a_broker_kill_and_restart(broker, client, own_connections):
    create(client, "a/retry")
    service = AppendService(client, connection_per_journal=own_connections)
    service.append("a/retry", b"one\n").result(DEADLINE_S)
    port = broker.port
    broker.kill()
    pending = service.append("a/retry", b"two\n")
    broker.start(port)
    assert pending.result(DEADLINE_S).end == 8
    assert service.statistics()["retries"] >= 1
    service.close()
    assert read_all(client, "a/retry") == b"one\ntwo\n"


def test_watched_list_follows_the_selected_journals(client):
    create(client, "t/part-000")
    with WatchedList(client, "prefix=t/") as watched:
        assert watched.wait_ready(DEADLINE_S)
        assert watched.journals == ["t/part-000"]
        create(client, "x/other")  # not selected.
        create(client, "t/part-001")
        while watched.journals != ["t/part-000", "t/part-001"]:
            assert watched.wait_for_change(DEADLINE_S), watched.journals
        assert [i.name for i in watched.infos] == watched.journals


def test_watched_list_with_a_bad_selector_raises_on_wait(client):
    with WatchedList(client, "name in (") as watched:
        with pytest.raises(ValidationError):
            watched.wait_ready(DEADLINE_S)

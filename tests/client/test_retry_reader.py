"""RetryReader: resumes after kill -9, follows offset jumps, stops or blocks at the head;
read offload: byte-identical to broker reads."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from herald.client import BrokerClient, FragmentInfo, OffloadReader, RetryReader, read_fragment
from herald.testing import wait_persisted
from tests.client.client_helpers import DEADLINE_S, create

BLOCK = b"".join(b'{"n": %6d, "pad": "%s"}\n' % (i, b"x" * 40) for i in range(40))  # ~2.6 KiB


def fill(client: BrokerClient, journal: str, appends: int) -> bytes:
    """Append ``appends`` distinct ~2.6 KiB blocks; with 1 KiB fragments each block
    ends up in its own fragment (a spool rolls before the next append)."""
    written = []
    for i in range(appends):
        body = BLOCK.replace(b'"n"', b'"%d"' % i)
        client.append(journal, body)
        written.append(body)
    return b"".join(written)


def test_non_blocking_retry_reader_stops_at_the_write_head(client):
    create(client, "a/one")
    assert list(RetryReader(client, "a/one", block=False)) == []  # 416 → empty.
    client.append("a/one", b"abc\n")
    client.append("a/one", b"def\n")
    reader = RetryReader(client, "a/one", offset=2, block=False)
    assert b"".join(c for _, c in reader) == b"c\ndef\n"
    assert reader.offset == 8 and reader.jumped == []


def test_end_offset_stops_the_reader_there(client):
    create(client, "a/one")
    client.append("a/one", b"0123456789")
    reader = RetryReader(client, "a/one", offset=2, block=True, end_offset=5)
    assert b"".join(c for _, c in reader) == b"234"


def test_blocking_reader_at_the_tail_receives_later_appends(client):
    create(client, "a/one")
    client.append("a/one", b"old\n")
    reader = RetryReader(client, "a/one", offset=-1, block=True)
    got: queue.Queue = queue.Queue()
    thread = threading.Thread(target=lambda: [got.put(x) for x in reader], daemon=True)
    thread.start()
    # The reader is positioned once its read is open; appending before that is
    # also fine: -1 resolves when the read opens, so wait for the open.
    deadline = time.monotonic() + DEADLINE_S
    while reader.statistics()["opens"] == 0 or reader.offset == -1:
        assert time.monotonic() < deadline
        time.sleep(0.01)  # wait-ok: the reader thread exposes no open event
    client.append("a/one", b"new\n")
    assert got.get(timeout=DEADLINE_S) == (4, b"new\n")
    reader.close()


def test_retry_reader_resumes_at_its_offset_after_broker_kill_and_restart(broker, client):
    create(client, "a/one")
    client.append("a/one", b"before\n")
    reader = RetryReader(client, "a/one", block=True)
    got: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [got.put(x) for x in reader], daemon=True).start()
    assert got.get(timeout=DEADLINE_S) == (0, b"before\n")

    broker.restart()  # kill -9, then the same port again.
    with BrokerClient(broker.url) as fresh:
        fresh.append("a/one", b"after\n")

    assert got.get(timeout=DEADLINE_S) == (7, b"after\n")
    assert reader.statistics()["opens"] >= 2
    reader.close()


def test_reader_follows_an_offset_jump_over_pruned_fragments(client):
    create(client, "a/pruned", length=1024, retention="1s")
    content = fill(client, "a/pruned", 3)
    infos = wait_persisted(client, "a/pruned", 2)
    removed = client.prune("a/pruned", now=time.time() + 3600)
    assert [r.fragment.begin for r in removed] == [i.fragment.begin for i in infos if i.fragment.is_persisted]
    survivor = max(r.fragment.end for r in removed)

    # The survivor is the spool: it is persisted at once, then the read jumps to it.
    reader = RetryReader(client, "a/pruned", offset=0, block=True, end_offset=len(content))
    data = b"".join(c for _, c in reader)
    assert reader.jumped == [(0, survivor)]
    assert data == content[survivor:]


@pytest.mark.parametrize("codec", ["SNAPPY", "GZIP", "ZSTANDARD", "NONE"])
def test_offload_reads_are_byte_identical_to_broker_reads(client, codec):
    create(client, "a/off", length=1024, compression_codec=codec)
    content = fill(client, "a/off", 5)
    wait_persisted(client, "a/off", 4)

    via_broker = b"".join(c for _, c in RetryReader(client, "a/off", block=False))
    offloaded = OffloadReader(client, "a/off", block=False)
    direct = b"".join(c for _, c in offloaded)
    assert via_broker == direct == content
    stats = offloaded.statistics()
    assert stats["offloaded_bytes"] > 0 and stats["broker_bytes"] > 0  # the tail is unpersisted.
    assert stats["offloaded_bytes"] + stats["broker_bytes"] == len(content)

    mid = OffloadReader(client, "a/off", offset=1000, block=False, end_offset=len(content) - 10)
    assert b"".join(c for _, c in mid) == content[1000:-10]


def test_read_fragment_matches_the_broker_for_every_persisted_fragment(broker, client):
    create(client, "a/frag", length=1024, compression_codec="GZIP")
    content = fill(client, "a/frag", 4)
    infos = [i for i in wait_persisted(client, "a/frag", 3) if i.fragment.is_persisted]
    for info in infos:
        f = info.fragment
        assert info.signed_url and info.signed_url.startswith("file://")
        expected = b"".join(c for _, c in client.read("a/frag", f.begin, end_offset=f.end))
        assert b"".join(read_fragment(info)) == expected == content[f.begin:f.end]
        unsigned = FragmentInfo(f, None)
        assert b"".join(read_fragment(unsigned, file_root=broker.file_root)) == expected

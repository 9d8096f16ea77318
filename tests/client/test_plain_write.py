"""`AppendService(connection_per_journal=True)` (`herald.client.plain_write`): each
sender thread appends over a plain connection of its own, its batch's copied and
owned pieces gathered into one body — the same bytes, results and typed errors
as through the client, a slot that raises still writes nothing, a connection the
broker closed is reopened, and a broker gone and back is retried through."""

from __future__ import annotations

import httpx
import pytest

from herald.client import AppendService, BrokerClient
from herald.client.plain_write import PlainAppends
from herald.protocol.errors import JournalNotFoundError, RegisterMismatchError
from tests.client.client_helpers import create


def read_all(client: BrokerClient, journal: str) -> bytes:
    return b"".join(c for _, c in client.read(journal)) if client.write_head(journal) else b""


def test_copied_and_owned_pieces_commit_in_order_on_each_journals_own_connection(client):
    create(client, "pw/a")
    create(client, "pw/b")
    with AppendService(client, linger_s=60, connection_per_journal=True) as service:
        assert service.connection_per_journal
        for journal in ("pw/a", "pw/b"):
            with service.start_append(journal) as slot:
                slot.write(b"copied-1\n")
                slot.write(memoryview(b"copied-2\n"))
                slot.write_owned(b"owned-1\n")
                slot.write(b"copied-3\n")
                for i in range(2500):  # more pieces than one sendmsg takes (IOV_MAX)
                    slot.write_owned(b"%d\n" % i)
        service.flush()
        conns = {journal: q.conn for journal, q in service._queues.items()}
        assert all(isinstance(c, PlainAppends) for c in conns.values()) and len(set(map(id, conns.values()))) == 2
        assert service.statistics()["batches"] == 2
    want = b"copied-1\ncopied-2\nowned-1\ncopied-3\n" + b"".join(b"%d\n" % i for i in range(2500))
    assert read_all(client, "pw/a") == read_all(client, "pw/b") == want


def test_a_slot_that_raises_drops_its_copied_and_owned_pieces(client):
    create(client, "pw/r")
    with AppendService(client, linger_s=60, connection_per_journal=True) as service:
        with service.start_append("pw/r") as slot:
            slot.write(b"kept-")
        with pytest.raises(RuntimeError):
            with service.start_append("pw/r") as slot:
                slot.write(b"lost-1\n")
                slot.write_owned(b"lost-2\n")
                slot.write(b"lost-3\n")
                raise RuntimeError("framing failed mid-batch")
        with service.start_append("pw/r") as slot:
            slot.write(b"1\n")
            slot.write_owned(b"2\n")
    assert read_all(client, "pw/r") == b"kept-1\n2\n"


def test_plain_appends_answer_as_the_client_does(broker, client):
    create(client, "pw/x")
    plain = PlainAppends(broker.url, 10, {})
    try:
        first = plain.append("pw/x", [b"a", memoryview(b"b\n")], union_registers="owner=one")
        second = client.append("pw/x", b"ab\n")
        assert (first.begin, first.end, second.begin) == (0, 3, 3) and first.sha1_hex == second.sha1_hex
        for call in (lambda c: c.append("pw/x", [b"no\n"], check_registers="owner=two"),
                     lambda c: c.append("pw/missing", [b"no\n"])):
            with pytest.raises((RegisterMismatchError, JournalNotFoundError)) as plain_err:
                call(plain)
            with pytest.raises((RegisterMismatchError, JournalNotFoundError)) as client_err:
                call(_Whole(client))
            assert (type(plain_err.value), str(plain_err.value)) == (type(client_err.value), str(client_err.value))
        broker.restart()  # kill -9, same port: the kept-alive connection is dead, and reopened
        assert plain.append("pw/x", [b"c\n"]).end == 8
        port = broker.port
        broker.kill()
        with pytest.raises(httpx.TransportError):
            plain.append("pw/x", [b"d\n"])
        broker.start(port)
    finally:
        plain.close()
    assert read_all(client, "pw/x") == b"ab\nab\nc\n"


class _Whole:
    """`BrokerClient.append` called with pieces, as `PlainAppends` is."""

    def __init__(self, client: BrokerClient) -> None:
        self.client = client

    def append(self, journal: str, pieces: list[bytes], **registers: str):
        return self.client.append(journal, b"".join(pieces), **registers)

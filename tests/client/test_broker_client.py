"""BrokerClient and AsyncBrokerClient against a real broker: same protocol code, same answers."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from herald.client import AsyncBrokerClient, BrokerClient
from herald.client import _protocol as ops
from herald.client.broker import READ_RECV_BYTES
from herald.keyspace.base import Change
from herald.protocol.errors import (
    HeraldError,
    JournalNotFoundError,
    OffsetNotYetAvailableError,
    RegisterMismatchError,
    Status,
    ValidationError,
)
from herald.protocol.labels import LabelSelector, LabelSet
from tests.client.client_helpers import create


def test_append_returns_commit_and_read_returns_the_bytes(client):
    create(client, "a/one")
    body = b'{"Msg": "Hello"}\n'
    result = client.append("a/one", body)
    assert (result.begin, result.end, result.write_head) == (0, len(body), len(body))
    assert result.sha1_hex == hashlib.sha1(body).hexdigest()
    assert client.write_head("a/one") == len(body)
    assert b"".join(chunk for _, chunk in client.read("a/one")) == body
    assert list(client.read("a/one", offset=7)) == [(7, body[7:])]


def test_list_selects_by_label_and_prefix_sorted_by_name(client):
    for name in ("b/two", "a/one", "b/one"):
        create(client, name)
    assert [i.name for i in client.list("prefix=b/")] == ["b/one", "b/two"]
    infos = client.list("")
    assert [i.name for i in infos] == ["a/one", "b/one", "b/two"]
    assert all(i.mod_revision >= i.create_revision > 0 for i in infos)
    members = infos[0].route["members"]
    assert infos[0].primary == members[infos[0].route["primary"]]["suffix"] != ""


def test_apply_with_stale_revision_fails_and_changes_nothing(client):
    spec = create(client, "a/one")
    revision = client.list("name=a/one")[0].mod_revision
    client.apply([Change(revision, upsert=spec)])
    with pytest.raises(HeraldError) as caught:
        client.apply([Change(revision, upsert=spec), Change(0, upsert=spec.__class__("a/two"))])
    assert caught.value.status is Status.ETCD_TRANSACTION_FAILED
    assert caught.value.field == "changes[0].expect_mod_revision"
    assert [i.name for i in client.list("")] == ["a/one"]


def test_errors_are_typed_from_the_broker_json_body(client):
    with pytest.raises(JournalNotFoundError):
        client.append("no/such", b"x")
    create(client, "a/one")
    with pytest.raises(OffsetNotYetAvailableError) as caught:
        list(client.read("a/one", offset=0, block=False))
    assert caught.value.write_head == 0
    with pytest.raises(ValidationError) as bad:
        client.list("name in (")
    assert bad.value.field == "selector"


def test_register_fencing_stale_owner_fails_412_and_writes_nothing(client):
    """[I-REG-1]: owner=a writes while it holds the register; once owner=b is
    unioned in, owner=a's appends fail REGISTER_MISMATCH and write nothing."""
    create(client, "a/log")
    first = client.append("a/log", b"a1\n", union_registers="owner=a")
    assert first.registers == LabelSet.of("owner", "a")
    for i in range(3):
        client.append("a/log", b"a%d\n" % (i + 2), check_registers="owner=a")
    taken = client.append("a/log", b"b1\n", check_registers=LabelSelector.parse("owner=a"),
                          union_registers=LabelSet.of("owner", "b"))
    assert taken.registers == LabelSet.of("owner", "b")
    head = client.write_head("a/log")
    with pytest.raises(RegisterMismatchError) as caught:
        client.append("a/log", b"zombie\n", check_registers="owner=a")
    assert caught.value.http_code == 412
    assert caught.value.registers == LabelSet.of("owner", "b")
    assert client.write_head("a/log") == head
    content = b"".join(c for _, c in client.read("a/log"))
    assert content == b"a1\na2\na3\na4\nb1\n"
    assert client.append("a/log", b"b2\n", check_registers="owner=b").begin == head


def test_register_subtract_removes_the_register(client):
    create(client, "a/log")
    client.append("a/log", b"x", union_registers="owner=a,lease=1")
    result = client.append("a/log", b"y", subtract_registers="lease=1")
    assert result.registers == LabelSet.of("owner", "a")


def test_async_client_gives_the_same_answers_as_sync(broker, client):
    create(client, "a/one")
    client.append("a/one", b"hello\nworld\n")

    async def run():
        async with AsyncBrokerClient(broker.url) as aclient:
            infos = await aclient.list("prefix=a/")
            appended = await aclient.append("a/one", b"again\n", union_registers="key=v")
            chunks = [c async for _, c in aclient.read("a/one", offset=6)]
            fragments = await aclient.fragments("a/one")
            with pytest.raises(OffsetNotYetAvailableError):
                async for _ in aclient.read("a/one", offset=appended.end):
                    pass
            return infos, appended, b"".join(chunks), fragments

    infos, appended, content, fragments = asyncio.run(run())
    assert infos == client.list("prefix=a/")
    assert (appended.begin, appended.end, appended.registers) == (12, 18, LabelSet.of("key", "v"))
    assert content == b"world\nagain\n"
    assert fragments == client.fragments("a/one")


def test_fragments_operation_follows_page_tokens():
    """The sans-I/O operation asks for every page until the token is 0."""
    frag = {"journal": "a/one", "begin": 0, "end": 10, "sum": "ab" * 20, "compression_codec": "SNAPPY"}
    op = ops.journal_fragments("a/one")
    first = next(op)
    assert first.json["next_page_token"] == 0
    page1 = ops.Response(200, {}, b'{"fragments": [{"fragment": %s}], "next_page_token": 10}'
                         % repr(frag).replace("'", '"').encode())
    second = op.send(page1)
    assert second.json["next_page_token"] == 10
    frag2 = dict(frag, begin=10, end=20)
    with pytest.raises(StopIteration) as done:
        op.send(ops.Response(200, {}, b'{"fragments": [{"fragment": %s}], "next_page_token": 0}'
                             % repr(frag2).replace("'", '"').encode()))
    assert [i.fragment.begin for i in done.value.value] == [0, 10]


def test_non_json_error_becomes_internal_naming_the_http_code():
    with pytest.raises(HeraldError) as caught:
        ops.raise_for_error(ops.Response(502, {}, b"<html>bad gateway</html>"))
    assert caught.value.status is Status.INTERNAL
    assert "HTTP 502" in str(caught.value)


def test_bad_register_selector_fails_before_sending():
    with pytest.raises(ValidationError):
        ops.append_request("a/one", b"x", check="owner in (")


def test_client_settings_are_plain_and_reprs_name_the_address():
    c = BrokerClient("http://example:8080/", timeout_s=3)
    assert (c.address, c.timeout_s) == ("http://example:8080", 3)
    assert "example:8080" in repr(c)
    c.close()


def test_client_pickles_as_its_settings_and_head_reports_the_fragment(client):
    import pickle

    create(client, "a/one")
    client.append("a/one", b"0123456789")
    with pickle.loads(pickle.dumps(client)) as copy:
        assert (copy.address, copy.timeout_s) == (client.address, client.timeout_s)
        head = copy.head("a/one", 4)
    assert (head.offset, head.write_head) == (4, 10)
    assert head.fragment_name and head.fragment_name.startswith("0000000000000000-000000000000000a-")


def test_async_streamed_reads_ask_the_socket_for_a_mebibyte_at_a_time(client, broker):
    """httpcore's 64 KiB reads cost most of the client's CPU at a GB/s; if an httpx
    or httpcore upgrade moves the attribute `_widen_reads` sets, this notices. (A
    sync client of an ``http://`` broker reads over its own socket: test_plain_read.)"""
    create(client, "a/wide")
    client.append("a/wide", b"x\n")

    def connection(response):
        stream = response.stream
        for attribute in ("_stream", "_httpcore_stream", "_stream", "_connection"):
            stream = getattr(stream, attribute)
        return stream

    async def read_async():
        async with AsyncBrokerClient(broker.url) as aclient:
            reader = aclient.read("a/wide")
            assert [chunk async for _, chunk in reader] == [b"x\n"]
            return connection(reader._response).READ_NUM_BYTES

    assert asyncio.run(read_async()) == READ_RECV_BYTES


def test_a_plain_http_client_loads_no_ca_bundle_and_trusts_no_tls():
    """A fresh process's first client (each stream query's Spark source runner) skips
    the 15-40 ms CA bundle when its address is ``http://``; TLS through that context
    fails verification rather than passing unverified. ``https://`` keeps the default."""
    import ssl

    from herald.client import ClientSecurity

    plain = ClientSecurity().verify("http://127.0.0.1:8080")
    assert plain.cert_store_stats()["x509_ca"] == 0
    assert (plain.verify_mode, plain.check_hostname) == (ssl.CERT_REQUIRED, True)
    secure = ClientSecurity().verify("https://broker.example:8443")
    assert secure is ClientSecurity().verify("HTTPS://other:1") and secure.cert_store_stats()["x509_ca"] > 0

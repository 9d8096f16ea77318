"""``herald attach-uuids`` and ``herald journals read --committed`` against a real broker."""

from __future__ import annotations

import uuid

import orjson
from typer.testing import CliRunner

from herald.cli.main import app
from herald.client import AppendService, BrokerClient
from herald.client.publisher import Publisher
from herald.message import get_flags, get_producer, uuid_from_str
from herald.testing import apply_specs, journal_spec

runner = CliRunner()


def test_attach_uuids_gives_each_line_a_v1_uuid_of_one_producer_in_order():
    result = runner.invoke(app, ["attach-uuids"], input='{"a": 1}\n{"b": 2}\n\n{"c": 3}\n')
    assert result.exit_code == 0, result.output
    docs = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert [sorted(d) for d in docs] == [["UUID", "a"], ["UUID", "b"], ["UUID", "c"]]
    parsed = [uuid.UUID(d["UUID"]) for d in docs]
    assert all(u.version == 1 and u.variant == uuid.RFC_4122 for u in parsed)
    assert len({get_producer(uuid_from_str(d["UUID"])) for d in docs}) == 1
    assert all(get_flags(uuid_from_str(d["UUID"])) == 0 for d in docs)
    assert [u.time for u in parsed] == sorted(u.time for u in parsed)
    assert len({u.time for u in parsed}) == 3


def test_attach_uuids_field_and_csv_and_bad_input():
    named = runner.invoke(app, ["attach-uuids", "--field", "id"], input='{"a": 1}\n')
    assert list(orjson.loads(named.stdout)) == ["id", "a"]
    csv = runner.invoke(app, ["attach-uuids", "--format", "csv"], input="x,y\n")
    assert uuid.UUID(csv.stdout.split(",")[0]).version == 1
    bad = runner.invoke(app, ["attach-uuids"], input="not json\n")
    assert bad.exit_code == 1


def test_read_committed_prints_each_committed_message_once_and_hides_acks(broker):
    apply_specs(broker.url, journal_spec("cli/txn"))
    with BrokerClient(broker.url) as client, AppendService(client) as service:
        pub = Publisher(service, ["cli/txn"])
        pub.publish_uncommitted(b"k", {"n": 1})
        checkpoint = pub.build_ack_intents()
        pub.write_ack_intents(checkpoint)
        pub.publish_uncommitted(b"k", {"n": 2})  # never acknowledged: rolled back below
        service.flush(30)
        pub.write_ack_intents(checkpoint)
        Publisher(service, ["cli/txn"]).publish_committed(b"k", {"n": 3})  # another producer
        service.flush(30)
        client.append("cli/txn", b"".join(c for _o, c in client.read("cli/txn")))  # duplicates
    result = runner.invoke(app, ["journals", "read", "-l", "name=cli/txn", "--committed", "--broker", broker.url])
    assert result.exit_code == 0, result.output
    assert [orjson.loads(line)["n"] for line in result.stdout.splitlines()] == [1, 3]

"""Exactly-once end to end against a real broker [I-SEQ-1]: two transactional
publishers over three journals, one crashing before its ACK and recovering by
re-appending its last recorded intents."""

from __future__ import annotations

import orjson

from herald.client import AppendService
from herald.client.committed import is_ack, read_committed
from herald.client.publisher import Publisher


def committed_ns(client, journal: str) -> list[int]:
    return [orjson.loads(env.value)["n"] for env in read_committed(client, journal) if not is_ack(env)]


def test_crashed_publisher_rolls_back_by_reappending_its_last_intents(client, make_partitions):
    names = make_partitions("txn/", 3)
    keys = [b"k0", b"k1", b"k2", b"k3", b"k4", b"k5"]
    expected: dict[str, list[int]] = {name: [] for name in names}
    with AppendService(client, linger_s=0.001) as service:
        alice = Publisher(service, names)
        bob = Publisher(service, names)

        def publish(pub, n, committed):
            fut = pub.publish_uncommitted(keys[n % len(keys)], {"n": n})
            if committed:
                expected[pub.journal_for(keys[n % len(keys)])].append(n)
            return fut

        # Alice commits a transaction spanning all three journals, interleaved with Bob's.
        for n in range(0, 30):
            publish(alice if n % 2 else bob, n, committed=True)
        alice_checkpoint = alice.build_ack_intents()  # "recorded durably" before writing
        alice.write_ack_intents(alice_checkpoint)
        bob.write_ack_intents(bob.build_ack_intents())
        # Alice starts another transaction, then "crashes" before writing its ACKs.
        for n in range(100, 120):
            publish(alice, n, committed=False)
        service.flush(30)
        # Recovery: re-append the last recorded intents; this rolls back 100..119.
        alice.write_ack_intents(alice_checkpoint)
        # Alice restarts as a new producer and commits more; the old writes stay dead.
        alice_again = Publisher(service, names)
        for n in range(200, 210):
            publish(alice_again, n, committed=True)
        alice_again.write_ack_intents(alice_again.build_ack_intents())
        service.flush(30)
    # Re-append everything journal 0 holds, as an at-least-once retry storm would:
    # every message comes back with its original UUID and must be dropped.
    first = names[0]
    content = b"".join(chunk for _offset, chunk in client.read(first))
    client.append(first, content)
    for name in names:
        assert sorted(committed_ns(client, name)) == sorted(expected[name])
        assert len(committed_ns(client, name)) == len(set(committed_ns(client, name)))

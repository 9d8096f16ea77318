"""The generator's plan and the audit's counts, against a real broker (no Spark)."""

from __future__ import annotations

import os
from collections import Counter

import orjson
import pytest

from herald.client import AppendService
from herald.message import Clock, NDJSONFraming, ProducerID, PublisherCore, mapping_by_name, modulo_mapping
from herald.pipelines.audit import audit, committed_keys
from herald.pipelines.generate import GeneratorSettings, generate, plan_events

NDJSON = NDJSONFraming()


def test_plan_retries_repeat_the_same_body_later_and_are_reproducible():
    settings = GeneratorSettings(count=5000, dup_rate=0.05, retry_delay_s=0.5, seed=7)
    plan = list(plan_events(settings, 1_700_000_000_000))
    assert plan == list(plan_events(settings, 1_700_000_000_000))
    originals = {ev.message_id: ev for ev in plan if not ev.is_retry}
    retries = [ev for ev in plan if ev.is_retry]
    assert len(originals) == 5000
    assert 150 < len(retries) < 350  # ~5 % of 5000
    positions = {ev.message_id: i for i, ev in enumerate(plan) if not ev.is_retry}
    for i, ev in enumerate(plan):
        if ev.is_retry:
            assert ev.body == originals[ev.message_id].body
            assert i > positions[ev.message_id] + 1  # later, with other events between.
    doc = orjson.loads(plan[0].body)
    assert set(doc) == {"messageId", "anonymousId", "timestamp", "type"}
    assert doc["timestamp"].endswith("Z") and doc["messageId"].startswith("ajs-")


def test_generated_copies_of_an_event_share_a_journal_under_modulo_mapping(client, journals):
    inputs, _ = journals
    settings = GeneratorSettings(count=2000, dup_rate=0.05, retry_delay_s=0.2, seed=3)
    stats = generate(client, "prefix=events/", settings)
    assert stats.events == 2000 and stats.retries > 50
    where: dict[str, set[str]] = {}
    for info in client.list("prefix=events/"):
        for k, _, _ in committed_keys(client, f"name={info.name}", "messageId"):
            where.setdefault(k, set()).add(info.name)
    assert len(where) == 2000
    assert all(len(names) == 1 for names in where.values())
    assert all(names == {modulo_mapping(k.encode(), inputs)} for k, names in where.items())


def _publish_txn(service: AppendService, core: PublisherCore, items: list[tuple[str, bytes]],
                 commit: bool = True) -> list:
    """Publish ``items`` (journal, body) uncommitted, then append their ACKs unless
    ``commit`` is False; returns the ACK intents (to re-append as a rollback)."""
    for journal, body in items:
        with service.start_append(journal) as slot:
            slot.write(core.stamp_uncommitted(journal, NDJSON, body))
    intents = core.build_ack_intents()
    if commit:
        _append_intents(service, intents)
    service.flush()
    return intents


def _append_intents(service: AppendService, intents: list) -> None:
    for intent in intents:
        service.append(intent.journal, intent.data)
    service.flush()


def test_audit_counts_exactly_duplicates_missing_and_rolled_back_output(client, journals):
    _inputs, outputs = journals
    generate(client, "prefix=events/", GeneratorSettings(count=3000, dup_rate=0.02, retry_delay_s=0.1, seed=11))
    copies = Counter(k for k, _, _ in committed_keys(client, "prefix=events/", "messageId"))
    keys = sorted(copies)
    core = PublisherCore(ProducerID.new(os.urandom(6)), Clock.from_unix_ns(1_700_000_000 * 10**9))
    with AppendService(client) as service:
        def out(k: str) -> tuple[str, bytes]:
            return modulo_mapping(k.encode(), outputs), orjson.dumps({"messageId": k})

        committed = _publish_txn(service, core, [out(k) for k in keys[5:]])  # keys[:5] are missing.
        _publish_txn(service, core, [out(k) for k in keys[:10]], commit=False)
        _append_intents(service, committed)  # recovery re-appends the last ACKs: rolls the above back.
        _publish_txn(service, core, [out(k) for k in keys[100:103]])  # three duplicates.
        _publish_txn(service, core, [out("never-input")])
    report = audit(client, "prefix=events/", "prefix=deduped/")
    assert report.input_events == sum(copies.values()) > 3000
    assert report.unique_keys == 3000 and report.input_duplicates == sum(copies.values()) - 3000
    assert report.output_events == 3000 - 5 + 3 + 1
    assert (report.output_duplicates, report.missing_keys, report.unexpected_keys) == (3, 5, 1)
    assert not report.ok
    assert report.latency_p50_ms is not None


@pytest.mark.parametrize("mapping", ["modulo", "rendezvous"])
def test_mappings_spread_keys_over_all_partitions(mapping):
    names = [f"events/part-{i:03d}" for i in range(4)]
    hits = Counter(mapping_by_name(mapping, None)(f"ajs-{i}".encode(), names) for i in range(4000))
    assert set(hits) == set(names) and min(hits.values()) > 500

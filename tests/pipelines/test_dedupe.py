"""The dedupe job on the session-wide Spark: exact audits, the window, skew [I-DEDUP-1]."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from herald.client import BrokerClient
from herald.message import Clock, NDJSONFraming, ProducerID, PublisherCore
from herald.pipelines.audit import audit, committed_keys
from herald.pipelines.dedupe import DedupeSettings, run_dedupe
from herald.pipelines.generate import GeneratorSettings, generate

pytestmark = [pytest.mark.slow, pytest.mark.spark]
NDJSON = NDJSONFraming()


def _settings(broker, tmp_path: Path, **kw) -> DedupeSettings:
    return DedupeSettings(broker=broker.url, input="prefix=events/", output="prefix=deduped/",
                          checkpoint=str(tmp_path / "ckpt"), **kw)


class Client:
    """Publishes chosen events to chosen journals (a phone, in effect)."""

    def __init__(self, client: BrokerClient) -> None:
        self.client = client
        self.core = PublisherCore(ProducerID.new(os.urandom(6)), Clock.from_unix_ns(time.time_ns()))

    def send(self, journal: str, *events: dict) -> None:
        self.core.clock.update(time.time_ns())
        self.client.append(journal, b"".join(self.core.stamp_committed(journal, NDJSON, orjson.dumps(e))
                                             for e in events))


def _output_counts(client: BrokerClient) -> Counter:
    return Counter(k for k, _, _ in committed_keys(client, "prefix=deduped/", "messageId"))


def test_dedupe_is_exact_across_batches_journals_and_restarts(spark, broker, client, journals, tmp_path):
    # Random mapping: copies of an event land in different journals; small
    # batches: retries straddle micro-batches; a second run resumes the state.
    gen = GeneratorSettings(count=3000, dup_rate=0.05, retry_delay_s=0.5, mapping="random", seed=5)
    generate(client, "prefix=events/", gen)
    settings = _settings(broker, tmp_path, max_bytes_per_trigger=60_000)
    first = run_dedupe(spark, settings, report=None)
    assert first.batches >= 5
    generate(client, "prefix=events/", GeneratorSettings(count=1000, dup_rate=0.05, mapping="random", seed=6))
    retry = next(iter(committed_keys(client, "prefix=events/", "messageId")))[0]
    body = {"messageId": retry, "anonymousId": "x", "timestamp": "2017-06-26T14:38:23.264Z", "type": "page"}
    Client(client).send("events/part-003", body)  # a late retry of the very first event.
    second = run_dedupe(spark, settings, report=None)
    report = audit(client, "prefix=events/", "prefix=deduped/")
    assert report.ok, report
    assert report.unique_keys == report.output_events == 4000
    assert report.input_duplicates > 150
    assert first.duplicates_dropped + second.duplicates_dropped == report.input_duplicates
    assert first.late_dropped == second.late_dropped == 0
    assert second.events_out == 1000 and second.state_keys == 4000


def test_a_duplicate_inside_the_window_is_dropped_and_one_older_passes(spark, broker, client, journals, tmp_path):
    inputs, _ = journals
    phone = Client(client)
    settings = _settings(broker, tmp_path, window_s=4.0)

    def event(key: str) -> dict:
        return {"messageId": key, "anonymousId": "u", "timestamp": "2017-06-26T14:38:23.264Z", "type": "page"}

    phone.send(inputs[0], event("old"), event("other"))
    run_dedupe(spark, settings, report=None)
    # Let the window (4 s, plus its 10 % band) pass in batch time; this is the
    # window under test, not a wait for anything to happen.
    time.sleep(settings.window_s * 1.1 + 1)  # wait-ok: the window itself is under test
    phone.send(inputs[1], event("ticker"), event("recent"))   # moves the watermark on.
    run_dedupe(spark, settings, report=None)
    phone.send(inputs[0], event("old"))      # older than the window: a new event by definition.
    phone.send(inputs[2], event("recent"))   # inside the window: a duplicate.
    run_dedupe(spark, settings, report=None)
    assert _output_counts(client) == {"old": 2, "other": 1, "ticker": 1, "recent": 1}


@pytest.mark.parametrize("guard", [True, False])
def test_skewed_event_time_in_one_journal_loses_nothing_with_the_guard(spark, broker, client, make_partitions,
                                                                        tmp_path, guard):
    """[I-DEDUP-1]: journal A's clocks run 41 minutes ahead of journal B's. A raw
    event-time watermark lets A evict B's keys and drop B's later events as late."""
    a, b = make_partitions("events/", 2)
    make_partitions("deduped/", 2)
    phone = Client(client)
    settings = _settings(broker, tmp_path, time_field="timestamp", window_s=1800.0, skew_guard=guard)
    now_ms = int(time.time() * 1000)

    def event(key: str, ahead_s: int = 0) -> dict:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now_ms / 1000 + ahead_s)) + ".000Z"
        return {"messageId": key, "anonymousId": "u", "timestamp": ts, "type": "track"}

    phone.send(a, *(event(f"a{i}", ahead_s=41 * 60) for i in range(50)))
    phone.send(b, *(event(f"b{i}") for i in range(50)))
    run_dedupe(spark, settings, report=None)
    phone.send(b, *(event(f"b{i}") for i in range(100)))  # 50 retries, 50 new events.
    summary = run_dedupe(spark, settings, report=None)
    report = audit(client, "prefix=events/", "prefix=deduped/")
    if guard:
        assert report.ok and report.output_events == 150, report
        assert summary.late_dropped == 0
    else:
        assert not report.ok and report.missing_keys > 0, report


def test_max_keys_ages_out_the_oldest_keys_and_reports_the_shrunk_window(spark, broker, client, journals, tmp_path):
    # Event times 1 ms apart (the generator's virtual clock), so there is an order to age out by.
    generate(client, "prefix=events/", GeneratorSettings(count=6000, dup_rate=0.0, seed=9))
    settings = _settings(broker, tmp_path, time_field="timestamp", max_keys=1000, max_bytes_per_trigger=80_000)
    summary = run_dedupe(spark, settings, report=None)
    assert summary.events_out == 6000 and summary.late_dropped == 0
    assert summary.state_keys <= 1500  # Enforced between batches: it may overshoot by a batch or so.
    assert summary.effective_window_s < settings.window_s
    assert summary.below_min_window
    prom = (tmp_path / "ckpt" / "herald-dedupe" / "metrics.prom").read_text()
    assert "herald_dedupe_below_min_window 1" in prom
    assert audit(client, "prefix=events/", "prefix=deduped/").ok  # no retries: nothing may pass twice.


def test_the_batch_time_is_current_timestamp_in_milliseconds_exactly(spark):
    """The clamp's ``now`` goes through ``reflect`` (evaluated, not compiled into the
    stage: `herald.pipelines.dedupe._batch_now_ms`); its value is still the batch's
    ``unix_millis(current_timestamp())``, to the millisecond."""
    from pyspark.sql import functions as F

    from herald.pipelines.dedupe import _batch_now_ms

    row = spark.range(3).select(_batch_now_ms().alias("now"), F.unix_millis(F.current_timestamp()).alias("want")).collect()
    assert [r.now for r in row] == [r.want for r in row] and row[0].now > 1_700_000_000_000

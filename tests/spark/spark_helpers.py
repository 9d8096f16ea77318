"""Helpers for the Spark tests: journals, publishers, read-backs (imported by
module name: tests/spark has no package, and ``conftest`` is ambiguous)."""

from __future__ import annotations

import os
import time

from herald.client import BrokerClient
from herald.message import Clock, ProducerID, PublisherCore, framing_for
from herald.testing import apply_specs, journal_spec

NDJSON = framing_for("application/x-ndjson")


def make_journals(broker, *names: str, labels: dict | None = None, **fragment) -> list[str]:
    specs = []
    for name in names:
        spec = journal_spec(name, **fragment)
        for k, v in (labels or {}).items():
            spec["labels"].append({"name": k, "value": v})
        specs.append(spec)
    apply_specs(broker.url, *specs)
    return list(names)


class Producer:
    """A publisher writing straight to a journal (tests drive txns by hand)."""

    def __init__(self, client: BrokerClient) -> None:
        self.client = client
        self.core = PublisherCore(ProducerID.new(os.urandom(6)), Clock.from_unix_ns(time.time_ns()))

    def committed(self, journal: str, *bodies: dict) -> bytes:
        data = b"".join(self.core.stamp_committed(journal, NDJSON, b) for b in bodies)
        self.client.append(journal, data)
        return data

    def uncommitted(self, journal: str, *bodies: dict, send: bool = True) -> bytes:
        data = b"".join(self.core.stamp_uncommitted(journal, NDJSON, b) for b in bodies)
        if send:
            self.client.append(journal, data)
        return data

    def ack(self, send: bool = True) -> list:
        intents = self.core.build_ack_intents()
        if send:
            for i in intents:
                self.client.append(i.journal, i.data)
        return intents


def ns(row_values) -> list[int]:
    """The ``n`` field of NDJSON message values, in order."""
    import orjson

    return [orjson.loads(v)["n"] for v in row_values]


def broker_bytes(client: BrokerClient, journal: str) -> bytes:
    """Everything a plain broker read returns (to the write head)."""
    return b"".join(chunk for _, chunk in client.read(journal, 0))


def reference_committed(client: BrokerClient, journal: str) -> list[bytes]:
    """The read-committed values of ``journal`` by the pure Sequencer over one
    broker read: the model every Spark read-committed path must equal."""
    from herald.message import Envelope, Sequencer, sequence

    data = broker_bytes(client, journal)
    envs = [Envelope(journal, f.begin, f.end, f.uuid, f.value) for f in NDJSON.decoder().feed(data, 0)]

    def replay(_journal: str, lo: int, hi: int) -> list[Envelope]:
        return [e for e in envs if lo <= e.begin and e.end <= hi]

    return [e.value for e in sequence(envs, Sequencer(ring_size=4), replay, include_acks=False)]


def wait_persisted(client: BrokerClient, journal: str, at_least: int, deadline_s: float = 30) -> None:
    """Until ``journal`` has ``at_least`` persisted fragments (the persister runs
    in the background; this waits on its observable result, with a deadline)."""
    stop = time.monotonic() + deadline_s
    while True:
        n = sum(1 for i in client.fragments(journal) if i.fragment.is_persisted)
        if n >= at_least:
            return
        if time.monotonic() > stop:
            raise AssertionError(f"{journal}: only {n} persisted fragments after {deadline_s}s")
        time.sleep(0.05)  # wait-ok: polling with a deadline; uploads have no event


def spark_values(df) -> list[bytes]:
    return [bytes(r.value) for r in df.orderBy("journal", "begin").select("value").collect()]


def herald_read(spark, broker, selector: str, **options):
    reader = spark.read.format("herald").option("broker", broker.url).option("selector", selector)
    for k, v in options.items():
        reader = reader.option(k, str(v).lower() if isinstance(v, bool) else str(v))
    return reader.load()


def run_stream(spark, broker, selector: str, ck, out, max_bytes: int = 0, **options) -> None:
    """One availableNow run of a read-committed stream; each micro-batch's rows go
    to ``out/<batchId>`` (overwritten, so a replayed batch replaces its rows)."""
    reader = (spark.readStream.format("herald").option("broker", broker.url).option("selector", selector)
              .option("stateLocation", str(ck)))
    if max_bytes:
        reader = reader.option("maxBytesPerTrigger", str(max_bytes))
    for k, v in options.items():
        reader = reader.option(k, str(v))

    def sink(df, batch_id):
        df.select("journal", "begin", "end", "uuid", "value").write.mode("overwrite").parquet(f"{out}/{batch_id:05d}")

    query = (reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(ck))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None


def stream_rows(spark, out) -> list:
    from pathlib import Path

    if not any(Path(out).glob("*/*.parquet")):
        return []
    return spark.read.parquet(f"{out}/*").collect()

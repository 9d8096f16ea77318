"""Helpers for the Spark tests: read-backs and query runners (journals, producers
and waits come from `herald.testing`)."""

from __future__ import annotations

from herald.client import BrokerClient
from herald.message import framing_for

NDJSON = framing_for("application/x-ndjson")


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


def spark_values(df) -> list[bytes]:
    return [bytes(r.value) for r in df.orderBy("journal", "begin").select("value").collect()]


def herald_read(spark, broker, selector: str, **options):
    reader = spark.read.format("herald").option("broker", broker.url).option("selector", selector)
    for k, v in options.items():
        reader = reader.option(k, str(v).lower() if isinstance(v, bool) else str(v))
    return reader.load()


def run_stream(spark, broker, selector: str, ck, out, max_bytes: int = 0, schema: str = "", **options) -> None:
    """One availableNow run of a read-committed stream (of ``schema``'s columns, if
    given); each micro-batch's rows go to ``out/<batchId>`` (overwritten, so a
    replayed batch replaces its rows)."""
    reader = spark.readStream.format("herald").schema(schema) if schema else spark.readStream.format("herald")
    reader = reader.option("broker", broker.url).option("selector", selector).option("stateLocation", str(ck))
    if max_bytes:
        reader = reader.option("maxBytesPerTrigger", str(max_bytes))
    for k, v in options.items():
        reader = reader.option(k, str(v))

    def sink(df, batch_id):
        columns = [c for c in df.columns if c in ("journal", "begin", "end", "uuid", "value", "key") or c.startswith("json_")]
        df.select(*columns).write.mode("overwrite").parquet(f"{out}/{batch_id:05d}")

    query = (reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(ck))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None


def stream_rows(spark, out) -> list:
    from pathlib import Path

    if not any(Path(out).glob("*/*.parquet")):
        return []
    return spark.read.parquet(f"{out}/*").collect()

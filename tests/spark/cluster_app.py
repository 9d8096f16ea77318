"""The app `test_cluster.py` submits to a standalone cluster (``spark-submit app.py …``).

It runs format ``herald``'s three paths with driver and executors in separate
processes: a batch read (its row count, to ``result``), a batch write (a
journal → journal copy, one transaction), and a read-committed stream into the
exactly-once sink (many small micro-batches; a ``batch N`` line after each, so
the test can kill a worker while the next one runs).

    spark-submit --master spark://… cluster_app.py BROKER CHECKPOINT RESULT
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

import herald.spark

BATCH_BYTES = 30_000


class BatchLines(StreamingQueryListener):
    """Prints ``batch N`` as each micro-batch completes (the test's cue)."""

    def onQueryStarted(self, event) -> None:  # noqa: ANN001
        pass

    def onQueryProgress(self, event) -> None:  # noqa: ANN001
        print(f"batch {event.progress.batchId} rows {event.progress.numInputRows}", flush=True)

    def onQueryIdle(self, event) -> None:  # noqa: ANN001
        pass

    def onQueryTerminated(self, event) -> None:  # noqa: ANN001
        pass


def main(broker: str, checkpoint: str, result: str) -> None:
    spark = SparkSession.builder.appName("herald-cluster-test").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    herald.spark.register(spark)
    events = (spark.read.format("herald").option("broker", broker).option("selector", "prefix=events/")
              .option("maxPartitionBytes", str(BATCH_BYTES)).load())
    rows = events.where("uuid is not null").count()
    events.select("value").write.format("herald").option("broker", broker) \
        .option("selector", "prefix=batch-copies/").mode("append").save()
    print("batch write done", flush=True)
    spark.streams.addListener(BatchLines())
    stream = (spark.readStream.format("herald").option("broker", broker).option("selector", "prefix=events/")
              .option("stateLocation", f"{checkpoint}/query").option("maxBytesPerTrigger", str(BATCH_BYTES)).load())
    query = (stream.select("value").writeStream.format("herald").option("broker", broker)
             .option("selector", "prefix=copies/").option("checkpointLocation", f"{checkpoint}/query")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    with open(result, "w") as f:
        json.dump({"batch_rows": rows, "stream_batches": query.lastProgress["batchId"] + 1}, f)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])

"""A journal → journal streaming copy, run as a child process the crash test
kills with SIGKILL (argv: broker checkpoint source-selector sink-selector mode)."""

from __future__ import annotations

import sys

from herald.testing.spark import make_spark_session


def main(broker: str, ck: str, src: str, dst: str, mode: str) -> None:
    spark = make_spark_session(master="local[2]", app_name="herald-crash-child")
    df = (spark.readStream.format("herald").option("broker", broker).option("selector", src)
          .option("stateLocation", ck).option("maxBytesPerTrigger", "4000")
          # Slices cut into parallel parts (herald.spark.slices) under kill -9 too.
          .option("minPartitions", "4").option("splitBytes", "600").load())
    writer = (df.select("value").writeStream.format("herald").option("broker", broker)
              .option("selector", dst).option("checkpointLocation", ck))
    trigger = {"availableNow": True} if mode == "available-now" else {"processingTime": "0 seconds"}
    query = writer.trigger(**trigger).start()
    print("started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])

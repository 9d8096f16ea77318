"""Format ``herald-ceiling``: the Python data source API's own ceiling for the
``herald`` schema. Each task yields one pre-built Arrow batch (~200-byte NDJSON
values, all nine columns) over and over, doing no Herald work, so its rows/s
is what Spark's Python-source path (Arrow IPC to the JVM, conversion to rows)
allows on this machine: the bound for format ``herald`` in the same run.
Workers import this module, so the bench puts the repository root on their
``PYTHONPATH``.

Options beside ``rows`` and ``partitions`` (to probe the API, issue 15): ``batchRows``
(rows per yielded batch, default `BATCH_ROWS`) and ``columns`` (a comma-separated
subset of the herald schema, in its order: what each column costs the JVM) and
``pauseMs`` (a sleep after each batch: the JVM's cost per row when its producer
is slow, as a task that decodes, without that task's CPU).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

__all__ = ["CeilingSource"]

BATCH_ROWS = 40_000


class CeilingSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "herald-ceiling"

    def schema(self) -> str:
        from herald.spark.rows import SPARK_SCHEMA

        names = self._columns()
        if names is None:
            return SPARK_SCHEMA
        return ", ".join(f for f in SPARK_SCHEMA.split(", ") if f.split(" ")[0] in names)

    def _columns(self) -> frozenset[str] | None:
        named = self.options.get("columns")
        return frozenset(c.strip() for c in named.split(",")) if named else None

    def reader(self, schema: object) -> DataSourceReader:
        return _Reader(int(self.options["rows"]), int(self.options["partitions"]),
                       int(self.options.get("batchRows", BATCH_ROWS)), self._columns(),
                       float(self.options.get("pauseMs", 0)))


class _Reader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, batch_rows: int, columns: frozenset[str] | None,
                 pause_ms: float) -> None:
        self.rows, self.parts, self.batch_rows, self.columns = rows, partitions, batch_rows, columns
        self.pause_s = pause_ms / 1000

    def partitions(self) -> list[InputPartition]:
        share = -(-self.rows // self.parts)
        return [InputPartition(min(share, self.rows - i * share)) for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import time

        import numpy as np

        from bench.publish import framed_messages
        from herald.message.columnar import Columns
        from herald.spark.rows import columns_batch

        body = framed_messages()[0]  # Built with numpy: building costs nothing per row.
        n, size = self.batch_rows, len(body) + 46  # A framed line: UUID field + body + newline.
        uuids = np.random.default_rng(7).integers(0, 256, (n, 16), dtype=np.uint8)
        ends = np.arange(1, n + 1, dtype=np.int64) * size
        cols = Columns(ends - size, ends, uuids, np.ones(n, dtype=bool),
                       np.frombuffer(body * n, np.uint8), np.arange(n + 1, dtype=np.int32) * len(body))
        batch = columns_batch("bench/spark-read", cols, self.columns)
        left = partition.value
        while left > 0:
            yield batch.slice(0, min(left, n))
            left -= n
            if self.pause_s:  # a producer as slow as a real one, without its CPU
                time.sleep(self.pause_s)

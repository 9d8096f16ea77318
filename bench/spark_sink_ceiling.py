"""Format ``herald-sink-ceiling``: the Python data source *sink* API's own ceiling.

Its batch and stream writers take the same Arrow batches format ``herald`` is
given and drop them, doing no Herald work (no framing, no appends, no ACK
intents, no records), so its rows/s is what Spark's Python-sink path (rows to
Arrow in the JVM, Arrow IPC to a Python worker, a commit message back, the
driver's commit in a Python worker) allows on this machine: the bound for the
``herald`` sink in the same run, as `bench.spark_ceiling` is for the source.
Workers import this module, so the bench puts the repository root on their
``PYTHONPATH``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

__all__ = ["SinkCeiling"]


@dataclass
class _Counted(WriterCommitMessage):
    rows: int = 0


def _drain(batches: Iterator[pa.RecordBatch]) -> _Counted:
    return _Counted(sum(batch.num_rows for batch in batches))


class SinkCeiling(DataSource):
    @classmethod
    def name(cls) -> str:
        return "herald-sink-ceiling"

    def writer(self, schema: object, overwrite: bool) -> DataSourceArrowWriter:
        return _BatchWriter()

    def streamWriter(self, schema: object, overwrite: bool) -> DataSourceStreamArrowWriter:
        return _StreamWriter()


class _BatchWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Counted:
        return _drain(iterator)

    def commit(self, messages: list) -> None:
        pass


class _StreamWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Counted:
        return _drain(iterator)

    def commit(self, messages: list, batchId: int) -> None:
        pass

    def abort(self, messages: list, batchId: int) -> None:
        pass

"""`HeraldDataSource`: format ``herald``, the class Spark registers and pickles.

Every Python process Spark starts for a query unpickles it first — the read
planner, the source runner, the writer's planner, the sink's commit runner, the
tasks — and then asks it for the one reader or writer it runs. So this module
imports only the options (no pyarrow, no numpy: a commit runner appends ACK
intents and needs neither; issue 15 measured numpy + pyarrow at 0.07–0.11 s of
a fresh process) and each factory imports its own side: readers from
`herald.spark.source`, writers from `herald.spark.sink` (whose task side,
`herald.spark.sink_tasks`, loads in the executors only).

Spark's Python processes drive Herald's clients synchronously, never under
trio, yet httpcore imports trio whenever it is installed (for its async locks):
58-71 ms of a fresh source runner's ~170 ms in Herald, measured here with trio
in the environment (selenium brings it). `lean_http` imports httpcore with trio
hidden, in these processes only (a user's driver may run trio; it never runs
these factories).

The factories run in reused workers (all but the stream's source runner), which
PySpark collects after every call: they freeze the process's objects out of
those collections first (`herald.spark.worker_gc`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

from herald.spark.options import HeraldOptions
from herald.spark.worker_gc import freeze_imports

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader

    from herald.spark.sink import BatchWriter, StreamWriter

__all__ = ["HeraldDataSource", "lean_http"]


def lean_http() -> None:
    """Import httpcore without trio, unless either is already loaded. httpcore's
    ``import trio`` then fails as when trio is absent (``trio = None``), which only
    an async client running under trio would notice; Spark's processes have none.
    trio itself stays importable afterwards."""
    if "httpcore" in sys.modules or "trio" in sys.modules:
        return
    sys.modules["trio"] = None  # type: ignore[assignment]  # import trio → ImportError
    try:
        import httpcore  # noqa: F401
    finally:
        del sys.modules["trio"]


class HeraldDataSource(DataSource):
    """Format ``herald``: journals as a Spark source and an exactly-once sink.
    Runs wherever Spark instantiates it (driver and workers); holds only options."""

    @classmethod
    def name(cls) -> str:
        return "herald"

    def schema(self) -> str:
        from herald.spark.keys import schema_with_key
        from herald.spark.rows import SPARK_SCHEMA

        return schema_with_key(SPARK_SCHEMA, self.options)

    def reader(self, schema: object) -> DataSourceReader:
        from herald.spark.projection import select_columns
        from herald.spark.source import BatchReader

        lean_http()
        freeze_imports()  # a read planner: a reused worker, collected after each job (worker_gc)
        return BatchReader(select_columns(schema, HeraldOptions.parse(self.options, streaming=False)))

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        from herald.spark.projection import select_columns
        from herald.spark.source import StreamReader

        # No freeze: the source runner is a fresh process per query, not a reused
        # worker (no collection after each call), and a first freeze's collection
        # would sit on the query's start-up.
        opts = select_columns(schema, HeraldOptions.parse(self.options, streaming=True))
        opts.require_state("a streaming read (sequencer snapshots)")
        if any(not url.lower().startswith("http://") for url in opts.brokers):
            lean_http()  # https: its calls go through httpx (http:// ones: herald.client.plain)
        return StreamReader(opts)

    def writer(self, schema: object, overwrite: bool) -> BatchWriter:
        from herald.spark.sink import BatchWriter, plan_journals

        lean_http()
        freeze_imports()  # the writer's planner (write_into_data_source), once per job
        opts = HeraldOptions.parse(self.options, streaming=False)
        return BatchWriter(opts, schema, plan_journals(opts))

    def streamWriter(self, schema: object, overwrite: bool) -> StreamWriter:
        from herald.spark.sink import StreamWriter, plan_journals

        lean_http()
        freeze_imports()  # the writer's planner and the sink's commit runner, once per micro-batch
        opts = HeraldOptions.parse(self.options, streaming=True)
        opts.require_state("the exactly-once sink (ACK intent records); set checkpointLocation")
        return StreamWriter(opts, schema, plan_journals(opts))  # listed here: pickling does no I/O

"""The PySpark data source ``herald``: journals as a Spark source and sink.

It owns the batch reader (one partition per persisted fragment, read straight
from its store, plus the unpersisted tail through a broker), the streaming
reader (offsets ``{journal: byte offset}``, read-committed across micro-batches
with sequencer snapshots), the exactly-once streaming sink and the batch writer
(one transaction), and lag from a query's checkpoint.

    >>> import herald.spark                                         # doctest: +SKIP
    >>> herald.spark.register(spark)
    >>> df = (spark.readStream.format("herald")
    ...       .option("broker", "http://localhost:8080").option("selector", "app=events")
    ...       .option("stateLocation", "/ckpt/q1").load())
    >>> (df.select("value").writeStream.format("herald")
    ...    .option("broker", "http://localhost:8080").option("selector", "app=copies")
    ...    .option("checkpointLocation", "/ckpt/q1").start())

Design and measurements: docs/spark.md.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from herald.lazy import lazy_exports

#: Public name → defining module, loaded on first use (`herald.lazy`): every Python
#: process Spark starts for a query imports this package on its way to one module
#: (the sink's commit runner to `herald.spark.sink`), and `rows` means pyarrow.
_EXPORTS = {
    "ARROW_SCHEMA": "herald.spark.rows",
    "HeraldOptions": "herald.spark.options",
    "JournalLag": "herald.spark.lag",
    "SPARK_SCHEMA": "herald.spark.rows",
    "checkpoint_offsets": "herald.spark.lag",
    "lag": "herald.spark.lag",
}

__all__ = ["ARROW_SCHEMA", "JournalLag", "SPARK_SCHEMA", "HeraldOptions", "checkpoint_offsets", "lag", "register"]

#: Sessions `register` has set up. A pipeline registers the format for every query
#: it starts (the dedupe bench: one per run), and each full registration walks
#: Herald's tree for stale bytecode, pickles the data source class and hands it to
#: the JVM: 20-80 ms of a query's start-up, measured here, for nothing the second
#: time. Weak: a stopped session's replacement is a new object, set up afresh.
_registered: weakref.WeakSet[Any] = weakref.WeakSet()

if TYPE_CHECKING:
    from herald.spark.lag import JournalLag, checkpoint_offsets, lag
    from herald.spark.options import HeraldOptions
    from herald.spark.rows import ARROW_SCHEMA, SPARK_SCHEMA


def register(spark: Any, ship: bool | None = None) -> None:
    """Register format ``herald`` with ``spark`` (a SparkSession), first making
    Herald importable by its Python workers (`herald.spark.workers`: checked in
    local mode, shipped as a zip when missing or on a cluster; ``ship`` forces
    either way). Raises at once, naming the fix, if the workers cannot import a
    dependency — not later, deep in a task, as ``No module named …``. Writes
    Herald's bytecode where it is missing (`herald.spark.bytecode`): each query's
    fresh Python processes then load it instead of compiling it. Once per session:
    later calls return at once, unless ``ship`` asks for a decision again."""
    if ship is None and spark in _registered:
        return
    from herald.spark.bytecode import precompile
    from herald.spark.datasource import HeraldDataSource
    from herald.spark.workers import ensure_importable, preset_files_path

    precompile()
    ensure_importable(spark, ship)  # before registering: Spark captures includes then
    preset_files_path(spark)  # and the environment: fresh runners start without re-reading zips
    spark.dataSource.register(HeraldDataSource)
    _registered.add(spark)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)

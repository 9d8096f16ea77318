"""Jobs built on ``herald.spark``, and what feeds and checks them.

It owns the de-duplication pipeline of Segment's blog (`dedupe`: Spark +
RocksDB state + the exactly-once sink, with its skew guard and size bound in
`control` and metrics in `metrics`), the synthetic event generator
(`generate`, publishing through the I/O `Publisher` of `publisher`), the audit
(`audit`, reading journals read-committed with `committed`). Only `dedupe`,
`control` and `metrics` import pyspark.

    >>> from herald.pipelines.generate import GeneratorSettings, plan_events
    >>> [ev.is_retry for ev in plan_events(GeneratorSettings(count=3, dup_rate=1.0, seed=1), 0)]
    [False, False, False, True, True, True]
"""

from herald.pipelines.audit import AuditReport, audit
from herald.pipelines.committed import read_committed
from herald.pipelines.generate import (
    GeneratorSettings,
    GeneratorStats,
    generate,
    plan_events,
)
from herald.pipelines.publisher import Publisher

__all__ = [
    "AuditReport",
    "GeneratorSettings",
    "GeneratorStats",
    "Publisher",
    "audit",
    "generate",
    "plan_events",
    "read_committed",
]

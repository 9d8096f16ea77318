"""Jobs built on ``herald.spark``, and what feeds and checks them.

It owns the de-duplication pipeline of Segment's blog (`dedupe`: Spark +
RocksDB state + the exactly-once sink, with its skew guard and size bound in
`control` and metrics in `metrics`), the synthetic event generator
(`generate`, publishing through `herald.client.Publisher`) and the audit
(`audit`, reading journals with `herald.client.read_committed`). Jobs only:
the client-side pieces they share live in `herald.client`. Only `dedupe`,
`control` and `metrics` import pyspark.

    >>> from herald.pipelines.generate import GeneratorSettings, plan_events
    >>> [ev.is_retry for ev in plan_events(GeneratorSettings(count=3, dup_rate=1.0, seed=1), 0)]
    [False, False, False, True, True, True]
"""

from herald.pipelines.audit import AuditReport, audit
from herald.pipelines.generate import (
    GeneratorSettings,
    GeneratorStats,
    generate,
    plan_events,
)

__all__ = [
    "AuditReport",
    "GeneratorSettings",
    "GeneratorStats",
    "audit",
    "generate",
    "plan_events",
]

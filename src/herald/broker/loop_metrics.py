"""Counters and histograms for the broker's hottest paths, exported when scraped.

prometheus_client's `Counter.inc` and `Histogram.observe` take a lock and walk
label and bucket tables: about 1–4 µs each, paid by every append for the benefit
of one scrape every few seconds. Everything that counts requests and group
commits runs on the broker's one event-loop thread, so it needs no lock: these
keep plain Python numbers (a dict increment, a bisect) and `LoopMetrics` turns
them into Prometheus families at scrape time. Loop thread only: never call
``inc`` or ``observe`` from an executor.

    REQUESTS = LoopCounter("herald_broker_requests", "…", ("op", "status"))
    REQUESTS.inc(("append", "OK"))
    REGISTRY.register(LoopMetrics([REQUESTS, ...]))
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import REGISTRY, Collector, CollectorRegistry

__all__ = ["JournalCounter", "LoopCounter", "LoopGauge", "LoopHistogram", "LoopMetrics"]


class LoopCounter:
    """A counter with labels, keyed by the tuple of label values."""

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...]) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self.counts: dict[tuple[str, ...], float] = {}

    def inc(self, key: tuple[str, ...], amount: float = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + amount

    def family(self) -> CounterMetricFamily:
        family = CounterMetricFamily(self.name, self.documentation, labels=list(self.labels))
        for key, value in sorted(self.counts.items()):
            family.add_metric(list(key), value)
        return family


class JournalCounter(Collector):
    """A counter labelled by ``journal``, exported exactly as prometheus_client's
    labelled `Counter` is (registered in ``registry`` when made, ``_total`` and
    ``_created`` per journal in the order journals were first counted), so
    ``/metrics`` is unchanged. ``child(journal)`` is that journal's ``[total]``: the
    hot path keeps it and adds to its item."""

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.name, self.documentation = name, documentation
        self._children: dict[str, tuple[list[float], float]] = {}  # journal -> ([total], created)
        if registry is not None:
            registry.register(self)

    def child(self, journal: str) -> list[float]:
        found = self._children.get(journal)
        if found is None:
            found = self._children[journal] = ([0.0], time.time())
        return found[0]

    def inc(self, journal: str, amount: float = 1) -> None:
        self.child(journal)[0] += amount

    def family(self) -> CounterMetricFamily:
        family = CounterMetricFamily(self.name, self.documentation, labels=["journal"])
        for journal, (total, created) in list(self._children.items()):
            family.add_metric([journal], total[0], created=created)
        return family

    def describe(self) -> list[CounterMetricFamily]:
        return [CounterMetricFamily(self.name, self.documentation, labels=["journal"])]

    def collect(self) -> list[CounterMetricFamily]:
        """As `prometheus_client.Counter.collect` (the status page's rates read it)."""
        return [self.family()]


class LoopGauge:
    """A gauge without labels (``value`` is read and written directly)."""

    def __init__(self, name: str, documentation: str) -> None:
        self.name, self.documentation, self.value = name, documentation, 0.0

    def family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(self.name, self.documentation, value=self.value)


class LoopHistogram:
    """A histogram without labels: counts per bucket, cumulated at scrape time."""

    def __init__(self, name: str, documentation: str, buckets: Iterable[float]) -> None:
        self.name, self.documentation = name, documentation
        self.bounds = sorted(float(b) for b in buckets)
        self.counts = [0] * (len(self.bounds) + 1)  # the last is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def family(self) -> HistogramMetricFamily:
        cumulative, running = [], 0
        for bound, count in zip([*self.bounds, math.inf], self.counts):
            running += count
            cumulative.append(("+Inf" if bound == math.inf else _format(bound), running))
        return HistogramMetricFamily(self.name, self.documentation, buckets=cumulative, sum_value=self.sum)


def _format(bound: float) -> str:
    return repr(bound)


class LoopMetrics(Collector):
    """Exports loop-local metrics (register once per process)."""

    def __init__(self, metrics: Iterable[Any]) -> None:
        self._metrics = list(metrics)

    def describe(self) -> list:
        return []

    def collect(self) -> Iterator[Any]:
        for metric in self._metrics:
            yield metric.family()

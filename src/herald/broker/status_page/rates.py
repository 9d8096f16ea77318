"""Append and read rates per journal over the last minutes, for the status page.

A sampler task reads the broker's byte counters (``herald_broker_appended_bytes``
and ``herald_broker_read_bytes``, which the hot paths bump anyway) every
``SAMPLE_S`` and keeps the last ``SAMPLES`` readings per served journal in a ring:
the page's sparklines cost the append path nothing, and the memory is bounded by
``SAMPLES`` × the journals this broker serves (rings of journals it stops serving
are dropped at the next sample).

    history = RateHistory()
    history.sample(now_s, appended={"a/b": 1024.0}, read={})   # the sampler does this
    history.rates("a/b")  # -> Rates(append_bytes_per_s=[...], read_bytes_per_s=[...])
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import Counter

from herald.broker.loop_metrics import JournalCounter
from herald.broker.metrics import METRICS

__all__ = ["SAMPLES", "SAMPLE_S", "RateHistory", "Rates", "run_sampler", "sparkline_points"]

SAMPLE_S = 5.0
SAMPLES = 72  # six minutes at SAMPLE_S
TOTAL = "*"  # the ring of the whole broker


@dataclass(frozen=True, slots=True)
class Rates:
    """Bytes per second between consecutive samples, oldest first."""

    append_bytes_per_s: list[float]
    read_bytes_per_s: list[float]

    @property
    def append_now(self) -> float:
        return self.append_bytes_per_s[-1] if self.append_bytes_per_s else 0.0

    @property
    def read_now(self) -> float:
        return self.read_bytes_per_s[-1] if self.read_bytes_per_s else 0.0


class RateHistory:
    """Rings of ``(time, appended total, read total)`` per journal, and for all of them."""

    def __init__(self, samples: int = SAMPLES) -> None:
        self._samples = samples
        self._rings: dict[str, collections.deque[tuple[float, float, float]]] = {}

    def sample(self, now_s: float, appended: dict[str, float], read: dict[str, float],
               served: Iterable[str] | None = None) -> None:
        """Record the counters' totals at ``now_s``; forget journals not in ``served``."""
        names = set(appended) | set(read) if served is None else set(served)
        for name in names:
            self._ring(name).append((now_s, appended.get(name, 0.0), read.get(name, 0.0)))
        self._ring(TOTAL).append((now_s, sum(appended.values()), sum(read.values())))
        for name in [n for n in self._rings if n not in names and n != TOTAL]:
            del self._rings[name]

    def _ring(self, name: str) -> collections.deque[tuple[float, float, float]]:
        ring = self._rings.get(name)
        if ring is None:
            ring = self._rings[name] = collections.deque(maxlen=self._samples)
        return ring

    def rates(self, name: str = TOTAL) -> Rates:
        ring = list(self._rings.get(name, ()))
        appends, reads = [], []
        for (t0, a0, r0), (t1, a1, r1) in zip(ring, ring[1:]):
            span = max(t1 - t0, 1e-9)
            appends.append(max(0.0, a1 - a0) / span)  # a counter reset (restart) is not negative traffic
            reads.append(max(0.0, r1 - r0) / span)
        return Rates(appends, reads)


def counter_totals(counter: Counter | JournalCounter) -> dict[str, float]:
    """A per-journal counter's current totals, by journal (public API: ``collect``)."""
    totals = {}
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                totals[sample.labels["journal"]] = sample.value
    return totals


async def run_sampler(history: RateHistory, served: Callable[[], Iterable[str]],
                      interval_s: float = SAMPLE_S) -> None:
    """Sample every ``interval_s`` until cancelled (a task of the app's lifetime)."""
    while True:
        history.sample(time.monotonic(), counter_totals(METRICS.appended_bytes),
                       counter_totals(METRICS.read_bytes), served())
        await asyncio.sleep(interval_s)  # wait-ok: sampling period, not synchronisation


def sparkline_points(values: list[float], width: int = 120, height: int = 24) -> str:
    """SVG ``polyline`` points for ``values`` scaled into ``width`` × ``height``
    (the top is the largest value; an empty or flat series is a line along the bottom)."""
    if len(values) < 2:
        return f"0,{height - 1} {width},{height - 1}"
    top = max(values) or 1.0
    step = width / max(len(values) - 1, 1)
    return " ".join(f"{i * step:.1f},{height - v / top * (height - 2) - 1:.1f}" for i, v in enumerate(values))

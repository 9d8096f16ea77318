"""The dedupe's size bound: the dedupe clock runs faster when the state is too big.

Spark's de-duplication state has no size limit: keys leave only when the
watermark passes them. To bound it by size (Segment's "size-bound, not
time-bound"), the driver adds a *boost* ``B`` to every row's dedupe time, and
makes ``B`` grow with batch time at ``rate`` ms per ms. The dedupe clock then
runs ``1 + rate`` times as fast as batch time, so the watermark passes keys that
much sooner — the oldest first, as Segment's sequence-number index ages them —
and the effective window is ``(window + band) / (1 + rate)`` of batch time.

``B`` reaches the query as a one-row static table, cross-joined to each
micro-batch (format ``herald-dedupe-control``, which re-reads its JSON file in
every batch). The row holds a schedule, not a value, so a batch's boost is a
deterministic function of its own batch timestamp ``now``::

    B(now) = from_ms + rate * (now - at_ms)

``rate`` is never negative, so ``now + B(now)`` never decreases — which is what
keeps the dedupe clock's lower clamp above the watermark: no row is ever late,
so no event is ever dropped as late data (see `herald.pipelines.dedupe`).
Relaxing the bound sets ``rate`` to 0; ``B`` then stays where it is, an offset
that changes nothing.

The file lives in the query's checkpoint directory; executors read it, so on a
cluster that directory must be shared (as Spark's checkpoint already must be).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql.datasource import DataSource, DataSourceReader

__all__ = ["Boost", "ControlSource", "read_boost", "write_boost"]

FORMAT = "herald-dedupe-control"


@dataclass(frozen=True, slots=True)
class Boost:
    """The boost schedule (milliseconds; ``rate`` ms per ms): see the module docstring."""

    rate: float = 0.0
    from_ms: int = 0
    at_ms: int = 0

    def at(self, now_ms: int) -> int:
        """B(now), as the query computes it."""
        return self.from_ms + int(self.rate * max(0, now_ms - self.at_ms))

    def retarget(self, rate: float, now_ms: int) -> Boost:
        """A schedule continuing this one from ``now_ms`` at ``rate`` (>= 0)."""
        return Boost(max(0.0, rate), self.at(now_ms), now_ms)


def read_boost(path: str | os.PathLike) -> Boost:
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return Boost()
    return Boost(float(doc.get("rate", 0.0)), int(doc.get("from_ms", 0)), int(doc.get("at_ms", 0)))


def write_boost(path: str | os.PathLike, boost: Boost) -> None:
    """Atomically replace the schedule (a batch reads the old or the new one whole)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(boost)))
    os.replace(tmp, path)


class ControlSource(DataSource):
    """Format ``herald-dedupe-control``: one row (rate, from_ms, at_ms) read
    from option ``path`` at execution time, so each micro-batch sees the file's
    current content."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return "rate double, from_ms long, at_ms long"

    def reader(self, schema: object) -> DataSourceReader:
        return _ControlReader(self.options["path"])


class _ControlReader(DataSourceReader):
    def __init__(self, path: str) -> None:
        self.path = path

    def read(self, partition: object) -> Iterator[tuple[float, int, int]]:
        """Executor, once per micro-batch."""
        b = read_boost(self.path)
        yield b.rate, b.from_ms, b.at_ms

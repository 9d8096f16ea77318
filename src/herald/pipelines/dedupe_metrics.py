"""The dedupe's metrics, from Spark's per-batch progress reports.

`DedupeMonitor` runs in the driver: it folds each micro-batch's progress into
totals (events in, duplicates dropped, events out, rows dropped as late — which
the dedupe clock's guard keeps at 0), the state's keys and bytes, the effective
window and events/s; it prints one line per batch and exports the same numbers
as JSON and Prometheus text (``<checkpoint>/herald-dedupe/metrics.{json,prom}``,
for a node-exporter textfile collector). It is also the size bound's controller:
when the state holds more than ``max_keys`` keys it raises the boost so the
oldest keys age out (`herald.pipelines.dedupe_control`), and it warns when the
effective window falls under ``min_window``, as Segment paged at 24 h.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from herald.pipelines.dedupe_control import Boost
from herald.pipelines.progress import ran

__all__ = ["DedupeMonitor", "DedupeSummary", "format_window"]

log = logging.getLogger(__name__)
SHRINK_MARGIN = 0.9   # aim under the cap, so one batch of growth doesn't overshoot.
RELAX_BELOW = 0.7     # under 70 % of the cap, halve the speed-up each batch.


@dataclass(frozen=True, slots=True)
class DedupeSummary:
    batches: int
    events_in: int
    duplicates_dropped: int
    events_out: int
    late_dropped: int
    state_keys: int
    state_bytes: int
    effective_window_s: float
    below_min_window: bool
    elapsed_s: float
    events_per_s: float

    @property
    def state_bytes_per_key(self) -> float:
        """What a key costs in the state store (RocksDB files over keys): the
        figure to size a window by (keys x this). Meaningful once the state holds
        many keys: RocksDB's fixed overhead dominates a small state."""
        return round(self.state_bytes / self.state_keys, 1) if self.state_keys else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "state_bytes_per_key": self.state_bytes_per_key}

    def line(self) -> str:
        return (f"events in {self.events_in}, duplicates dropped {self.duplicates_dropped}, "
                f"events out {self.events_out}, state keys {self.state_keys}, "
                f"state bytes {self.state_bytes} ({self.state_bytes_per_key:g} per key), "
                f"effective window {format_window(self.effective_window_s)}, "
                f"{self.events_per_s:,.0f} events/s over {self.batches} batches in {self.elapsed_s:.1f} s")


def format_window(seconds: float) -> str:
    """``28d``, ``3h20m``, ``4.5s``: the units a window is thought of in."""
    if seconds >= 86400 and seconds % 86400 < 1:
        return f"{seconds / 86400:.0f}d"
    if seconds >= 3600:
        return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60)}m"
    if seconds >= 60:
        return f"{int(seconds // 60)}m{int(seconds % 60)}s"
    return f"{seconds:.1f}s"


def _metric(op: dict, name: str) -> int:
    return int(op.get(name) or op.get("customMetrics", {}).get(name) or 0)


class DedupeMonitor:
    """Folds progress reports (dicts of StreamingQueryProgress.json) once each."""

    def __init__(self, window_s: float, min_window_s: float, max_keys: int, band_s: float,
                 boost: Boost | None = None, clock=time.time) -> None:
        self.window_s, self.min_window_s, self.max_keys, self.band_s = window_s, min_window_s, max_keys, band_s
        self.boost = boost or Boost()
        self.clock = clock
        self.seen: set[int] = set()
        self.started = clock()
        self.busy_s = 0.0
        self.totals = {"events_in": 0, "duplicates_dropped": 0, "events_out": 0, "late_dropped": 0}
        self.state_keys = self.state_bytes = 0
        self.span_ms = 0
        self.first_min_ms: int | None = None
        self.warned = False

    # -- folding ----------------------------------------------------------------------------

    def observe(self, p: dict) -> str | None:
        """Fold one batch's progress; returns its report line (None if seen, or if
        ``p`` reports a trigger that found no data: it carries the id of the batch
        that will run next, whose own report must still count, `herald.pipelines.progress`)."""
        batch = int(p.get("batchId", -1))
        if batch in self.seen or not ran(p):
            return None
        self.seen.add(batch)
        ops = p.get("stateOperators") or [{}]
        op = ops[0]
        rows_in = int(p.get("numInputRows") or 0)
        self.totals["events_in"] += rows_in
        self.totals["events_out"] += _metric(op, "numRowsUpdated")
        self.totals["duplicates_dropped"] += _metric(op, "numDroppedDuplicateRows")
        self.totals["late_dropped"] += _metric(op, "numRowsDroppedByWatermark")
        self.state_keys = _metric(op, "numRowsTotal")
        self.state_bytes = (_metric(op, "rocksdbTotalSSTFilesSize") or _metric(op, "rocksdbSstFileSize")
                            or _metric(op, "memoryUsedBytes"))
        self.busy_s += float(p.get("durationMs", {}).get("triggerExecution", 0)) / 1000
        self._note_span(p.get("eventTime") or {})
        self._control()
        return (f"batch {batch}: in {rows_in}, duplicates {_metric(op, 'numDroppedDuplicateRows')}, "
                f"out {_metric(op, 'numRowsUpdated')}, state keys {self.state_keys}, "
                f"state bytes {self.state_bytes} ({self._bytes_per_key:g} per key), "
                f"window {format_window(self.effective_window_s)}, "
                f"speed-up {1 + self.boost.rate:.3g}x")

    @property
    def _bytes_per_key(self) -> float:
        return round(self.state_bytes / self.state_keys, 1) if self.state_keys else 0.0

    def _note_span(self, event_time: dict) -> None:
        """The dedupe time covered by the state, for the size bound's estimate."""
        lo, hi = _ms(event_time.get("min")), _ms(event_time.get("max"))
        if lo is None or hi is None:
            return
        boost_ms = self.boost.at(int(self.clock() * 1000))  # t includes the boost; the span must not.
        lo, hi = lo - boost_ms, hi - boost_ms
        self.first_min_ms = lo if self.first_min_ms is None else min(self.first_min_ms, lo)
        self.span_ms = max(1, hi - self.first_min_ms)

    # -- the size bound --------------------------------------------------------------------

    @property
    def effective_window_s(self) -> float:
        """The window now: keys are kept ``(window + band) / (1 + rate)`` (control.py),
        reported as at most ``window``."""
        return min(self.window_s, (self.window_s + self.band_s) / (1 + self.boost.rate))

    def _control(self) -> None:
        """Speed the dedupe clock up so that ~``max_keys`` keys stay (keys assumed
        spread evenly over the time the state covers); back to 1× when well under."""
        if not self.max_keys:
            return
        now_ms = int(self.clock() * 1000)
        kept_s = self.window_s + self.band_s  # what the state keeps at 1×.
        if self.state_keys > self.max_keys:
            covered_s = min(self.span_ms / 1000 or kept_s, self.effective_window_s)
            keep_s = max(0.001, covered_s * self.max_keys / self.state_keys * SHRINK_MARGIN)
            self.boost = self.boost.retarget(max(self.boost.rate, kept_s / keep_s - 1), now_ms)
        elif self.state_keys < self.max_keys * RELAX_BELOW and self.boost.rate:
            rate = self.boost.rate / 2 if self.boost.rate > 0.01 else 0.0  # the window grows back gradually.
            self.boost = self.boost.retarget(rate, now_ms)
        below = self.effective_window_s < self.min_window_s
        if below and not self.warned:
            log.warning("dedupe effective window %s is under --min-window %s (state keys %d, --max-keys %d)",
                        format_window(self.effective_window_s), format_window(self.min_window_s),
                        self.state_keys, self.max_keys)
        self.warned = below

    # -- reporting -------------------------------------------------------------------------

    def summary(self) -> DedupeSummary:
        elapsed = self.clock() - self.started
        return DedupeSummary(
            batches=len(self.seen), **self.totals, state_keys=self.state_keys, state_bytes=self.state_bytes,
            effective_window_s=self.effective_window_s, below_min_window=self.effective_window_s < self.min_window_s,
            elapsed_s=round(elapsed, 3),
            events_per_s=round(self.totals["events_in"] / self.busy_s, 1) if self.busy_s else 0.0)

    def export(self, directory: Path) -> None:
        """Write metrics.json and metrics.prom atomically (a scraper sees whole files)."""
        s = self.summary()
        directory.mkdir(parents=True, exist_ok=True)
        _atomic(directory / "metrics.json", json.dumps(s.to_dict(), indent=2))
        gauges = {"events_in_total": s.events_in, "duplicates_dropped_total": s.duplicates_dropped,
                  "events_out_total": s.events_out, "late_dropped_total": s.late_dropped,
                  "state_keys": s.state_keys, "state_bytes": s.state_bytes,
                  "state_bytes_per_key": s.state_bytes_per_key,
                  "effective_window_seconds": s.effective_window_s, "min_window_seconds": self.min_window_s,
                  "below_min_window": int(s.below_min_window), "events_per_second": s.events_per_s}
        _atomic(directory / "metrics.prom", "".join(f"herald_dedupe_{k} {v}\n" for k, v in gauges.items()))


def _ms(text: Any) -> int | None:
    if not text:
        return None
    from datetime import datetime

    return int(datetime.fromisoformat(str(text)).timestamp() * 1000)


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)

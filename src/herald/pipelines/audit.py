"""The audit: does the output hold each input key exactly once? ([I-DEDUP-1])

Reads the input and output journals read-committed (`read_committed`, no Spark)
and counts: input events, unique keys, output events, duplicates in the output
(extra copies of a key: must be 0), keys missing from the output (must be 0),
and output keys that never were input. It also measures latency: for each
output event, the clock of the ACK that committed it minus the clock of the
key's first input message — append to deduplicated, readable output.

    with BrokerClient(url) as client:
        report = audit(client, "prefix=events/", "prefix=deduped/")
        assert report.ok
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import orjson

from herald.client import BrokerClient
from herald.client.committed import is_ack, read_committed
from herald.message import Envelope, clock_to_unix_ns

PROGRESS_EVERY = 1000  # events between progress reports

__all__ = ["AuditReport", "audit", "committed_keys"]


@dataclass(frozen=True, slots=True)
class AuditReport:
    input_events: int
    unique_keys: int
    output_events: int
    output_duplicates: int
    missing_keys: int
    unexpected_keys: int
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None

    @property
    def input_duplicates(self) -> int:
        return self.input_events - self.unique_keys

    @property
    def ok(self) -> bool:
        """Exactly once: no duplicate, nothing missing, nothing invented."""
        return self.output_duplicates == 0 and self.missing_keys == 0 and self.unexpected_keys == 0

    def to_dict(self) -> dict:
        return {**asdict(self), "input_duplicates": self.input_duplicates, "ok": self.ok}

    def rows(self) -> list[tuple[str, object]]:
        """(metric, value) rows for the table view."""
        d = self.to_dict()
        order = ("input_events", "unique_keys", "input_duplicates", "output_events", "output_duplicates",
                 "missing_keys", "unexpected_keys", "latency_p50_ms", "latency_p99_ms", "ok")
        return [(name.upper().replace("_", " "), "-" if d[name] is None else d[name]) for name in order]


def _key_of(value: bytes, key: str) -> str | None:
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    found = doc.get(key) if isinstance(doc, dict) else None
    return None if found is None else str(found)


def committed_keys(client: BrokerClient, selector: str, key: str) -> Iterator[tuple[str, int, int]]:
    """``(key, message clock, commit clock)`` of every committed event of the
    journals ``selector`` matches; the commit clock is the ACK's (or the message's
    own for OUTSIDE_TXN messages). Events without ``key`` are skipped."""
    for info in client.list(selector):
        pending: list[tuple[str, int]] = []
        for env in read_committed(client, info.name):
            if is_ack(env):
                yield from ((k, clock, env.clock) for k, clock in pending)
                pending = []
                continue
            k = _key_of(env.value, key)
            if k is not None:
                if _is_outside(env):
                    yield k, env.clock, env.clock
                else:
                    pending.append((k, env.clock))


def _is_outside(env: Envelope) -> bool:
    return env.uuid is None or env.flags == 0


def audit(client: BrokerClient, input_selector: str, output_selector: str, key: str = "messageId",
          progress: Callable[[int], None] | None = None) -> AuditReport:
    """Count what the input and output journals hold, read-committed. Blocks.
    ``progress(n)`` is told of each ``PROGRESS_EVERY`` events read (a CLI's bar)."""
    note = _every(PROGRESS_EVERY, progress)
    first_in: dict[str, int] = {}
    input_events = 0
    for k, clock, _ in committed_keys(client, input_selector, key):
        input_events += 1
        note()
        if k not in first_in or clock < first_in[k]:
            first_in[k] = clock
    out_counts: Counter[str] = Counter()
    latencies: list[float] = []
    for k, _, commit_clock in committed_keys(client, output_selector, key):
        out_counts[k] += 1
        note()
        if k in first_in:
            latencies.append((clock_to_unix_ns(commit_clock) - clock_to_unix_ns(first_in[k])) / 1e6)
    return AuditReport(
        input_events=input_events,
        unique_keys=len(first_in),
        output_events=sum(out_counts.values()),
        output_duplicates=sum(n - 1 for n in out_counts.values()),
        missing_keys=sum(1 for k in first_in if k not in out_counts),
        unexpected_keys=sum(1 for k in out_counts if k not in first_in),
        latency_p50_ms=_percentile(latencies, 50),
        latency_p99_ms=_percentile(latencies, 99),
    )


def _every(n: int, progress: Callable[[int], None] | None) -> Callable[[], None]:
    """A counter calling ``progress(n)`` once per ``n`` calls (a no-op without one)."""
    count = [0]

    def note() -> None:
        count[0] += 1
        if progress is not None and count[0] % n == 0:
            progress(n)

    return note


def _percentile(values: list[float], pct: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 1)
    return round(statistics.quantiles(values, n=100, method="inclusive")[pct - 1], 1)

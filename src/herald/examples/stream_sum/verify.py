"""The chunkers' check: each file's correct sum arrives exactly once, in bounded time.

A `Verifier` holds what every chunker of one run expects (file id → digest and
chunk count, registered *before* the file's end chunk is published) and reads
the sums journals read-committed, in a blocking thread per journal. Each sum
of this run (file ids carry the run's nonce; other runs' sums are ignored) is
checked as it arrives:

- a sum for a file whose end was never published, a second sum for a file,
  a wrong digest or chunk count, or a sum later than ``sum_timeout_s`` after
  the end chunk was acknowledged is a *violation*, reported at once through
  ``report`` and kept for the summary;
- a ``rejected`` message (a malformed chunk the summer skipped) is reported
  with its journal and offset, and counted; it is not a violation of
  exactly-once, so it does not fail the run by itself.

Time-to-sum is measured from the end chunk's acknowledgement (it is durable)
to the chunker reading its sum; `Figures` gives the count, p50 and p99.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from herald.client import BrokerClient
from herald.client.committed import is_ack, read_committed
from herald.examples.stream_sum.messages import Reject, Sum, parse_output

__all__ = ["Expected", "Figures", "Verifier"]

log = logging.getLogger(__name__)
WATCHDOG_PERIOD_S = 1.0


@dataclass(slots=True)
class Expected:
    sum: str
    chunks: int
    acked_at: float | None = None
    verified: bool = False
    timed_out: bool = False
    timed: bool = True  # False for the warm-up file, whose wait includes the summer's start-up


@dataclass(frozen=True, slots=True)
class Figures:
    """A run's outcome: what the run's note and the CLI print."""

    files_ended: int
    files_verified: int
    violations: tuple[str, ...]
    rejected: int
    p50_s: float
    p99_s: float

    def line(self) -> str:
        return (f"files verified {self.files_verified}/{self.files_ended}, violations {len(self.violations)}, "
                f"rejected chunks {self.rejected}, time-to-sum p50 {self.p50_s:.2f}s p99 {self.p99_s:.2f}s")


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(q / 100 * len(ordered)))) - 1]


@dataclass
class Verifier:
    """Expectations of one run, checked against the sums journals (thread-safe)."""

    client: BrokerClient
    sums: list[str]
    nonce: str
    sum_timeout_s: float = 60.0
    report: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic
    expected: dict[str, Expected] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    rejected: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._abandoned = False
        self._closed = False

    def start(self) -> Verifier:
        """Start reading every sums journal (daemon threads: they block on the journal),
        and a watchdog that reports overdue sums as they become overdue."""
        for journal in self.sums:
            thread = threading.Thread(target=self._read, args=(journal,), name=f"verify {journal}", daemon=True)
            thread.start()
            self._threads.append(thread)
        threading.Thread(target=self._watchdog, name="verify timeouts", daemon=True).start()
        return self

    def _watchdog(self) -> None:
        tick = threading.Event()
        while not self._closed:
            self.check_timeouts()
            tick.wait(WATCHDOG_PERIOD_S)  # a periodic check, not a synchronisation

    def expect(self, file_id: str, digest: str, chunks: int, timed: bool = True) -> None:
        """Call before publishing ``file_id``'s end chunk (``timed``: its time-to-sum counts)."""
        with self._lock:
            self.expected[file_id] = Expected(digest, chunks, timed=timed)

    def wait_verified(self, file_id: str, deadline_s: float) -> bool:
        """Block until ``file_id`` is verified (True), or a violation, `abandon` or
        the deadline (False)."""
        exp = self.expected[file_id]
        with self._lock:
            self._lock.wait_for(lambda: exp.verified or self._abandoned or self.violations, deadline_s)
            return exp.verified

    def acked(self, file_id: str) -> None:
        """The end chunk of ``file_id`` is durable: the time-to-sum clock starts."""
        with self._lock:
            exp = self.expected[file_id]
            if exp.acked_at is None:
                exp.acked_at = self.clock()

    def violation(self, text: str) -> None:
        with self._lock:
            self.violations.append(text)
            self._lock.notify_all()
        self.report(f"VIOLATION: {text}")

    def _read(self, journal: str) -> None:
        try:
            for env in read_committed(self.client, journal, block=True):
                if not is_ack(env):
                    self._observe(journal, env.begin, parse_output(env.value))
        except Exception as err:  # noqa: BLE001 — a thread's edge: the run must fail loudly.
            if not self._closed:
                self.violation(f"reading {journal} failed: {err!r}")

    def _observe(self, journal: str, offset: int, msg: Sum | Reject | None) -> None:
        if isinstance(msg, Reject):
            if msg.file_id is None or msg.file_id.startswith(self.nonce):
                with self._lock:
                    self.rejected += 1
                self.report(f"rejected chunk: {msg.journal} offset {msg.offset}: {msg.reason}")
        elif isinstance(msg, Sum) and msg.file_id.startswith(self.nonce):
            problem = self._check(msg)
            if problem:
                self.violation(f"{problem} (sum at {journal} offset {offset})")

    def _check(self, msg: Sum) -> str | None:
        """Record ``msg``; returns what is wrong with it, if anything."""
        now = self.clock()
        with self._lock:
            exp = self.expected.get(msg.file_id)
            if exp is None:
                return f"{msg.file_id}: a sum for a file whose end was never published"
            if exp.verified:
                return f"{msg.file_id}: a second sum"
            if (msg.sum, msg.chunks) != (exp.sum, exp.chunks):
                return (f"{msg.file_id}: wrong sum {msg.sum[:16]}…/{msg.chunks} chunks, "
                        f"want {exp.sum[:16]}…/{exp.chunks}")
            exp.verified = True
            waited_s = now - exp.acked_at if exp.acked_at is not None else 0.0
            if exp.timed:
                self.latencies.append(waited_s)
            self._lock.notify_all()
            late, reported = waited_s > self.sum_timeout_s, exp.timed_out
            exp.timed_out = exp.timed_out or late
        if late and reported:  # already a violation (the timeout): say when it came, count it once
            self.report(f"late sum: {msg.file_id} came {waited_s:.1f}s after its end")
        elif late:
            return f"{msg.file_id}: the sum came {waited_s:.1f}s after its end, over {self.sum_timeout_s:.0f}s"
        return None

    def check_timeouts(self) -> None:
        """Report every acknowledged file whose sum is overdue (once per file)."""
        now = self.clock()
        late = []
        with self._lock:
            for file_id, exp in self.expected.items():
                if not exp.verified and not exp.timed_out and exp.acked_at is not None \
                        and now - exp.acked_at > self.sum_timeout_s:
                    exp.timed_out = True
                    late.append(file_id)
        for file_id in late:
            self.violation(f"{file_id}: no sum within {self.sum_timeout_s:.0f}s of its end")

    def wait_all(self, poll_s: float = 0.5) -> None:
        """Block until every expected file is verified or timed out (or `abandon`)."""
        while True:
            self.check_timeouts()
            with self._lock:
                if self._abandoned or all(e.verified or e.timed_out for e in self.expected.values()):
                    return
                self._lock.wait(poll_s)

    def abandon(self) -> None:
        """Stop waiting: no more sums can come (the summer failed). Harmless once done."""
        with self._lock:
            self._abandoned = True
            self._lock.notify_all()

    def close(self) -> None:
        """Stop verifying: the readers' errors from here on (their client closing) are not violations."""
        self._closed = True

    def figures(self) -> Figures:
        with self._lock:
            verified = sum(e.verified for e in self.expected.values())
            return Figures(len(self.expected), verified, tuple(self.violations), self.rejected,
                           percentile(self.latencies, 50), percentile(self.latencies, 99))

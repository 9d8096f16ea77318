"""Per-journal append rate limits: ``JournalSpec.max_append_rate`` (bytes/s).

As in Gazette's append flow control, a limited journal slows its appenders down
rather than refusing them. Each chunk of an append body is charged, as it is
received, against a token bucket of the journal; a chunk that finds the bucket in
debt waits for the refill before the next chunk is read, so a fast client is held
back by TCP itself instead of being buffered [I-APPEND-2 holds: waiting appends
nothing]. Concurrent appenders share the bucket: each waits out the debt in front
of it, so together they get the journal's rate.

The bucket follows Gazette's numbers: a new bucket starts with one second of credit
(``BURST_S``), and idle time banks at most ten seconds of it (``BANK_S``) for spiky
producers. The rate in force is the spec's ``max_append_rate`` bounded by the
broker's ``--max-append-rate``; either being 0 means "no limit from this side"
(`effective_rate`).

`TokenBucket` and `effective_rate` are pure (time is an argument); `AppendRates`
owns one bucket per journal, reads the clock it was given and does the waiting::

    bucket = TokenBucket(rate=1000, now=0.0)
    bucket.charge(1000, now=0.0)   # 0.0: the first second's worth goes at once
    bucket.charge(500, now=0.0)    # 0.5: then the appender waits for the refill
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from herald.protocol.journal import JournalSpec

__all__ = ["BANK_S", "BURST_S", "AppendRates", "TokenBucket", "effective_rate"]

BURST_S = 1.0  # credit of a new bucket, in seconds of its rate (Gazette's flowControlBurstFactor)
BANK_S = 10.0  # most credit idle time may bank, in seconds (Gazette's flowControlBankFactor)


def effective_rate(spec_rate: int, broker_rate: int) -> int:
    """The bytes/s a journal may be appended at; 0 means unlimited.

    The broker's rate caps every journal, as Gazette's ``--broker.max-append-rate``
    says it does ("max rate that any one journal may be appended to"), including
    journals whose spec sets none.
    """
    limits = [rate for rate in (spec_rate, broker_rate) if rate > 0]
    return min(limits) if limits else 0


class TokenBucket:
    """Bytes that may be appended now. Pure: every method takes ``now`` (seconds).

    ``tokens`` goes negative while appenders are waiting: the debt is what they
    have been told to wait out, so a later charge waits behind it.
    """

    def __init__(self, rate: int, now: float) -> None:
        if rate <= 0:
            raise ValueError(f"a token bucket needs a positive rate, not {rate}")
        self.rate = rate
        self.tokens = rate * BURST_S
        self._last = now

    def refill(self, now: float) -> None:
        """Credit the time since the last call, up to ``BANK_S`` seconds' worth.

        A clock that went backwards credits nothing until it catches up.
        """
        if now <= self._last:
            return
        self.tokens = min(self.rate * BANK_S, self.tokens + (now - self._last) * self.rate)
        self._last = now

    def charge(self, size: int, now: float) -> float:
        """Charge ``size`` bytes; returns how long (s) to wait before taking more.

        Never refuses: a charge larger than the bank is admitted once its debt is
        waited out, so no append size is impossible at any rate.
        """
        self.refill(now)
        self.tokens -= size
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def set_rate(self, rate: int, now: float) -> None:
        """A new rate (a re-applied spec): time so far is credited at the old rate,
        and the bank is held to what the new rate may bank."""
        if rate <= 0:
            raise ValueError(f"a token bucket needs a positive rate, not {rate}")
        self.refill(now)
        self.rate = rate
        self.tokens = min(self.tokens, rate * BANK_S)


class AppendRates:
    """The token buckets of one broker's rate-limited journals.

    Lives on the event loop of the broker; ``clock`` is monotonic seconds (tests of
    the pure parts use `TokenBucket` directly).
    """

    def __init__(self, broker_rate: int = 0, clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_rate = broker_rate
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}

    def rate_of(self, spec: JournalSpec) -> int:
        return effective_rate(spec.max_append_rate, self.broker_rate)

    def delay(self, spec: JournalSpec, size: int) -> float:
        """Charge ``size`` received bytes to ``spec``'s journal; the wait it owes (s).

        Reads ``spec`` afresh on every call, so a re-applied spec governs the next
        chunk, even of an append already under way.
        """
        rate = self.rate_of(spec)
        if not rate:
            self._buckets.pop(spec.name, None)
            return 0.0
        now = self._clock()
        bucket = self._buckets.get(spec.name)
        if bucket is None:
            bucket = self._buckets[spec.name] = TokenBucket(rate, now)
        elif bucket.rate != rate:
            bucket.set_rate(rate, now)
        return bucket.charge(size, now)

    async def admit(self, spec: JournalSpec, size: int) -> None:
        """Wait until ``size`` received bytes of ``spec``'s journal may go on.

        Cancellable at any point (a client that goes away): its bytes stay charged,
        as they were received.
        """
        wait_s = self.delay(spec, size)
        if wait_s:
            await asyncio.sleep(wait_s)  # the limit itself: time is what is rationed

    def forget(self, name: str) -> None:
        """Drop the bucket of a journal this broker no longer serves."""
        self._buckets.pop(name, None)

"""Per-journal append rate limits: ``JournalSpec.max_append_rate`` (bytes/s).

As in Gazette, a limited journal slows its appenders down rather than refusing
them: each append is charged its size against a token bucket that refills at the
journal's rate and holds at most one second of it, and waits until its charge is
paid. An append larger than a second's worth is admitted after waiting out its
debt, so no append size is impossible. A rate of 0 falls back to the broker's
``--max-append-rate``; 0 there too means unlimited.

`TokenBucket` is pure (time is an argument); `AppendRates` owns one per journal
and does the waiting.
"""

from __future__ import annotations

import asyncio
import time

from herald.protocol.journal import JournalSpec

__all__ = ["AppendRates", "TokenBucket"]


class TokenBucket:
    """Bytes that may be appended now: refills at ``rate`` per second up to ``rate``."""

    def __init__(self, rate: int, now: float) -> None:
        self.rate = rate
        self.tokens = float(rate)
        self._last = now

    def charge(self, size: int, now: float) -> float:
        """Charge ``size`` bytes; returns how long the append must wait first (s)."""
        self.tokens = min(float(self.rate), self.tokens + (now - self._last) * self.rate)
        self._last = now
        self.tokens -= size
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def set_rate(self, rate: int, now: float) -> None:
        """A new rate (a re-applied spec) for the bytes charged from now on."""
        self.charge(0, now)
        self.rate = rate
        self.tokens = min(self.tokens, float(rate))


class AppendRates:
    """The token buckets of a broker's rate-limited journals."""

    def __init__(self, default_rate: int = 0) -> None:
        self.default_rate = default_rate
        self._buckets: dict[str, TokenBucket] = {}

    def rate_of(self, spec: JournalSpec) -> int:
        return spec.max_append_rate or self.default_rate

    async def admit(self, spec: JournalSpec, size: int) -> None:
        """Wait until ``size`` bytes may be appended to ``spec``'s journal."""
        rate = self.rate_of(spec)
        if not rate:
            self._buckets.pop(spec.name, None)
            return
        now = time.monotonic()
        bucket = self._buckets.get(spec.name)
        if bucket is None:
            bucket = self._buckets[spec.name] = TokenBucket(rate, now)
        elif bucket.rate != rate:
            bucket.set_rate(rate, now)
        delay = bucket.charge(size, now)
        if delay:
            await asyncio.sleep(delay)  # the limit itself: time is what is being rationed

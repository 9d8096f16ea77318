"""Retrying a failing peer without hammering it or the log.

`RetryPacer` spaces attempts exponentially with jitter up to a ceiling, and lets a
warning out at most once per ``warn_every_s`` with how many failures it stands
for ("peer X unreachable (N failures in the last M s)"). Pure: time is an argument.
"""

from __future__ import annotations

import random

__all__ = ["RetryPacer"]


DUE_WITHIN_S = 1e-3


class RetryPacer:
    """When to try again after consecutive failures, and when to say so."""

    def __init__(self, initial_s: float = 0.25, max_s: float = 5.0, warn_every_s: float = 10.0,
                 rnd: random.Random | None = None) -> None:
        self.initial_s, self.max_s, self.warn_every_s = initial_s, max_s, warn_every_s
        self._rnd = rnd or random.Random()
        self.failures = 0
        self.retry_at = 0.0
        self._warned_at: float | None = None
        self._unwarned = 0

    def failed(self, now: float) -> str | None:
        """Record a failure at ``now``; returns a warning's text when one is due."""
        self.failures += 1
        ceiling = min(self.max_s, self.initial_s * 2 ** min(self.failures - 1, 30))
        self.retry_at = now + ceiling * self._rnd.uniform(0.5, 1.0)
        self._unwarned += 1
        if self._warned_at is not None and now - self._warned_at < self.warn_every_s:
            return None
        since = "" if self._warned_at is None else f" in the last {now - self._warned_at:.0f} s"
        text = f"{self._unwarned} failures{since}; next try in {self.retry_at - now:.1f} s"
        self._warned_at, self._unwarned = now, 0
        return text

    def succeeded(self) -> None:
        self.failures, self.retry_at, self._warned_at, self._unwarned = 0, 0.0, None, 0

    def wait_s(self, now: float) -> float:
        """How long until the next attempt is due (0: now). Within a millisecond is
        now: asyncio runs a timer up to its clock's resolution early, and a caller
        that slept exactly ``wait_s`` must then find the attempt due, not refuse it."""
        left = self.retry_at - now
        return left if left > DUE_WITHIN_S else 0.0

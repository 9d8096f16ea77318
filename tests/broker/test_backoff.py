"""RetryPacer: exponential back-off with jitter and a ceiling, warnings at a bounded rate."""

from __future__ import annotations

import random

from herald.broker.backoff import RetryPacer


def test_delays_double_up_to_the_ceiling_with_jitter():
    pacer = RetryPacer(initial_s=0.25, max_s=5.0, rnd=random.Random(1))
    delays = []
    for _ in range(10):
        pacer.failed(now=100.0)
        delays.append(pacer.wait_s(100.0))
    ceilings = [min(5.0, 0.25 * 2 ** i) for i in range(10)]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings))
    assert max(delays) <= 5.0 and delays[-1] >= 2.5
    pacer.succeeded()
    assert pacer.wait_s(100.0) == 0.0 and pacer.failures == 0


def test_warnings_are_rate_limited_and_count_what_they_stand_for():
    pacer = RetryPacer(warn_every_s=10.0)
    warnings = [pacer.failed(now=t / 100) for t in range(0, 2000)]  # 100 failures/s for 20 s
    said = [w for w in warnings if w]
    assert len(said) == 2  # at 0 s and at 10 s, not 2000 lines
    assert said[1].startswith("1000 failures in the last 10 s")


def test_an_attempt_a_hair_before_its_slot_is_due():
    """asyncio may run a timer a clock tick early: a caller that slept exactly
    ``wait_s`` must find the attempt due, not be refused with "next try in 0.0 s"."""
    pacer = RetryPacer(rnd=random.Random(3))
    pacer.failed(100.0)
    assert pacer.wait_s(pacer.retry_at - 1e-6) == 0.0
    assert pacer.wait_s(pacer.retry_at - 0.01) > 0.0

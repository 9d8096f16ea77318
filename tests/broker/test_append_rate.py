"""``JournalSpec.max_append_rate``: appenders of a limited journal wait for their
bytes/s (Gazette's flow control), other journals are not held up, and a re-applied
spec changes the rate for later appends."""

from __future__ import annotations

import threading
import time

import pytest

from herald.broker.ratelimit import TokenBucket
from herald.testing import BrokerProcess, apply_specs, journal_spec

RATE = 64 << 10
PIECE = 16 << 10


def test_bucket_admits_a_second_of_burst_then_charges_time():
    bucket = TokenBucket(1000, now=0.0)
    assert bucket.charge(1000, now=0.0) == 0.0            # one second's worth at once
    assert bucket.charge(500, now=0.0) == pytest.approx(0.5)  # then it waits for the refill
    assert bucket.charge(0, now=10.0) == 0.0              # a long idle refills only to the cap
    assert bucket.tokens == 1000
    assert bucket.charge(3000, now=10.0) == pytest.approx(2.0)  # larger than the cap: waits its debt


def test_bucket_rate_change_applies_to_later_charges():
    bucket = TokenBucket(1000, now=0.0)
    bucket.charge(1000, now=0.0)
    bucket.set_rate(100, now=0.0)
    assert bucket.charge(100, now=0.0) == pytest.approx(1.0)
    bucket.set_rate(10_000, now=1.0)
    assert bucket.charge(5000, now=1.5) == 0.0  # half a second at the new rate refilled 5000


@pytest.fixture
def limited(tmp_path):
    proc = BrokerProcess(tmp_path / "d").start()
    apply_specs(proc.url, dict(journal_spec("rate/limited"), max_append_rate=RATE),
                journal_spec("rate/free"))
    yield proc
    proc.kill()


def test_a_limited_journal_waits_while_an_unlimited_one_does_not(limited):
    free_done, limited_done = threading.Event(), []

    def append_free():
        with limited.client() as http:
            for _ in range(16):
                http.put("/rate/free", content=b"f" * PIECE).raise_for_status()
        free_done.set()

    started = time.monotonic()
    free = threading.Thread(target=append_free)
    free.start()
    with limited.client() as http:
        for _ in range(16):  # 256 KiB at 64 KiB/s with a 64 KiB burst: ≥ 3 s
            http.put("/rate/limited", content=b"l" * PIECE).raise_for_status()
            limited_done.append(free_done.is_set())
    elapsed = time.monotonic() - started
    free.join()
    assert elapsed >= (16 * PIECE - RATE) / RATE * 0.95
    assert limited_done[-1], "the unlimited journal's 16 appends finished before the limited ones"
    with limited.client() as http:
        assert int(http.head("/rate/limited").headers["X-Write-Head"]) == 16 * PIECE


def test_reapplied_rate_takes_effect_for_later_appends(limited):
    apply_specs(limited.url, dict(journal_spec("rate/limited"), max_append_rate=RATE * 16))
    started = time.monotonic()
    with limited.client() as http:
        for _ in range(16):
            http.put("/rate/limited", content=b"l" * PIECE).raise_for_status()
    assert time.monotonic() - started < (16 * PIECE - RATE) / RATE  # no longer held to 64 KiB/s

"""The append rate limiter's arithmetic, on an injected clock (no broker, no waiting)."""

from __future__ import annotations

import pytest

from herald.broker.ratelimit import BANK_S, AppendRates, TokenBucket, effective_rate
from herald.protocol.journal import JournalSpec
from herald.testing import journal_spec


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def spec(rate: int, name: str = "rate/j") -> JournalSpec:
    return JournalSpec.from_dict(dict(journal_spec(name), max_append_rate=rate))


def test_new_bucket_admits_one_second_then_charges_time():
    bucket = TokenBucket(1000, now=0.0)
    assert bucket.charge(1000, now=0.0) == 0.0
    assert bucket.charge(500, now=0.0) == pytest.approx(0.5)
    assert bucket.charge(500, now=0.5) == pytest.approx(0.5)  # the debt, not the refill, is owed


def test_idle_time_banks_at_most_ten_seconds_of_burst():
    bucket = TokenBucket(1000, now=0.0)
    bucket.charge(1000, now=0.0)
    assert bucket.charge(0, now=3600.0) == 0.0
    assert bucket.tokens == 1000 * BANK_S
    assert bucket.charge(10_000, now=3600.0) == 0.0  # the banked burst
    assert bucket.charge(1, now=3600.0) > 0           # and not a byte more


def test_charge_larger_than_the_bank_waits_its_debt_instead_of_failing():
    bucket = TokenBucket(1000, now=0.0)
    assert bucket.charge(1_000_000, now=0.0) == pytest.approx(999.0)


def test_concurrent_charges_queue_behind_each_others_debt():
    bucket = TokenBucket(1000, now=0.0)
    bucket.charge(1000, now=0.0)
    waits = [bucket.charge(250, now=0.0) for _ in range(4)]
    assert waits == pytest.approx([0.25, 0.5, 0.75, 1.0])  # together, exactly the rate


def test_clock_going_backwards_credits_nothing():
    bucket = TokenBucket(1000, now=10.0)
    bucket.charge(1000, now=10.0)
    assert bucket.charge(100, now=5.0) == pytest.approx(0.1)
    assert bucket.charge(0, now=10.1) == pytest.approx(0.0)  # paid from 10.0, not from 5.0


def test_rate_change_applies_to_later_charges_and_caps_the_bank():
    bucket = TokenBucket(1000, now=0.0)
    bucket.charge(0, now=100.0)                    # 10 000 banked at 1000/s
    bucket.set_rate(100, now=100.0)
    assert bucket.tokens == 100 * BANK_S           # the bank of the slower rate
    assert bucket.charge(1100, now=100.0) == pytest.approx(1.0)
    bucket.set_rate(10_000, now=101.0)             # the second before is credited at 100/s
    assert bucket.charge(5000, now=101.5) == 0.0


@pytest.mark.parametrize("spec_rate, broker_rate, rate", [
    (0, 0, 0), (100, 0, 100), (0, 50, 50), (100, 50, 50), (30, 50, 30)])
def test_broker_rate_bounds_every_journal(spec_rate, broker_rate, rate):
    assert effective_rate(spec_rate, broker_rate) == rate


def test_unlimited_journal_never_waits_and_keeps_no_bucket():
    rates = AppendRates(clock=FakeClock())
    assert rates.delay(spec(0), 1 << 30) == 0.0
    assert rates.rate_of(spec(0)) == 0


def test_reapplied_spec_governs_the_next_charge():
    clock = FakeClock()
    rates = AppendRates(clock=clock)
    assert rates.delay(spec(1000), 1000) == 0.0
    assert rates.delay(spec(1000), 1000) == pytest.approx(1.0)
    clock.now += 1.0                                 # the debt is paid
    assert rates.delay(spec(4000), 2000) == pytest.approx(0.5)
    assert rates.delay(spec(0), 1 << 30) == 0.0      # unlimited again
    assert rates.delay(spec(1000), 1000) == 0.0      # a fresh bucket: one second of credit


def test_broker_rate_limits_a_journal_whose_spec_sets_none():
    rates = AppendRates(broker_rate=1000, clock=FakeClock())
    rates.delay(spec(0), 1000)
    assert rates.delay(spec(0), 500) == pytest.approx(0.5)
    assert rates.delay(spec(0, "rate/other"), 1000) == 0.0  # each journal has its own bucket


def test_forgotten_journal_starts_over_with_one_second_of_credit():
    rates = AppendRates(clock=FakeClock())
    rates.delay(spec(1000), 5000)
    rates.forget("rate/j")
    assert rates.delay(spec(1000), 1000) == 0.0

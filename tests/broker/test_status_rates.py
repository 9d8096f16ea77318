"""The status page's rate rings: bounded, forgetful of journals no longer served,
never negative across a counter reset; sparklines stay inside their box."""

from __future__ import annotations

from herald.broker.status_page.rates import TOTAL, RateHistory, sparkline_points


def test_rates_are_differences_over_time_and_the_ring_is_bounded():
    history = RateHistory(samples=4)
    for i in range(10):
        history.sample(i * 5.0, appended={"a/b/c": i * 500.0}, read={"a/b/c": i * 50.0})
    rates = history.rates("a/b/c")
    assert rates.append_bytes_per_s == [100.0, 100.0, 100.0]  # 4 samples: 3 intervals
    assert rates.read_now == 10.0
    assert history.rates(TOTAL).append_now == 100.0


def test_a_counter_reset_is_not_negative_traffic_and_unserved_journals_are_forgotten():
    history = RateHistory()
    history.sample(0.0, {"x/y/z": 1000.0, "gone/j": 5.0}, {})
    history.sample(5.0, {"x/y/z": 0.0}, {}, served=["x/y/z"])  # a restart reset the counter
    assert history.rates("x/y/z").append_bytes_per_s == [0.0]
    assert history.rates("gone/j").append_bytes_per_s == []


def test_sparkline_points_stay_inside_the_box():
    points = [tuple(map(float, p.split(","))) for p in sparkline_points([0, 5, 10, 2.5], 120, 24).split()]
    assert [x for x, _ in points] == [0.0, 40.0, 80.0, 120.0]
    assert all(0 <= y <= 24 for _, y in points) and min(y for _, y in points) == 1.0
    assert sparkline_points([], 120, 24) == "0,23 120,23"

"""``JournalSpec.max_append_rate`` on a real broker: appenders of a limited journal
wait for their bytes/s (Gazette's flow control) and are never refused, other
journals are not held up, a re-applied spec changes the rate, and the broker's
``--max-append-rate`` bounds every journal.

Timings are only ever lower bounds, read on the test's own clock: 256 KiB at
64 KiB/s, with one second (64 KiB) of burst credit, cannot take less than 3 s —
unless the burst is not bounded or the limit is not enforced.
"""

from __future__ import annotations

import threading
import time

import pytest

from herald.testing import BrokerProcess, apply_specs, journal_spec

RATE = 64 << 10
PIECE = 16 << 10
PIECES = 16
TOTAL = PIECE * PIECES
MIN_S = (TOTAL - RATE) / RATE * 0.95  # 3 s, less a margin for clock granularity


def limited_spec(name: str, rate: int = RATE) -> dict:
    return dict(journal_spec(name), max_append_rate=rate)


def append_pieces(proc: BrokerProcess, name: str, done: threading.Event | None = None) -> float:
    """Append TOTAL bytes as PIECES appends; returns the seconds it took."""
    started = time.monotonic()
    with proc.client() as http:
        for _ in range(PIECES):
            http.put(f"/{name}", content=b"x" * PIECE).raise_for_status()
    if done is not None:
        done.set()
    return time.monotonic() - started


def write_head(proc: BrokerProcess, name: str) -> int:
    with proc.client() as http:
        return int(http.head(f"/{name}").headers["X-Write-Head"])


@pytest.fixture
def broker_proc(tmp_path):
    proc = BrokerProcess(tmp_path / "d").start()
    yield proc
    proc.kill()


def test_limited_journal_waits_while_an_unlimited_one_does_not(broker_proc):
    apply_specs(broker_proc.url, limited_spec("rate/limited"), journal_spec("rate/free"))
    free_done = threading.Event()
    free = threading.Thread(target=append_pieces, args=(broker_proc, "rate/free", free_done))
    free.start()
    assert append_pieces(broker_proc, "rate/limited") >= MIN_S
    free_finished_first = free_done.is_set()
    free.join()
    assert free_finished_first, "the unlimited journal was held back with the limited one"
    assert write_head(broker_proc, "rate/limited") == write_head(broker_proc, "rate/free") == TOTAL


@pytest.mark.parametrize("method, path", [("PUT", "/rate/large"),
                                          ("POST", "/v1/journals/append?journal=rate/large")])
def test_one_large_append_is_paced_not_refused(broker_proc, method, path):
    apply_specs(broker_proc.url, limited_spec("rate/large"))
    started = time.monotonic()
    with broker_proc.client() as http:
        http.request(method, path, content=b"y" * TOTAL).raise_for_status()
    assert time.monotonic() - started >= MIN_S
    assert write_head(broker_proc, "rate/large") == TOTAL


def test_reapplied_spec_limits_later_appends(broker_proc):
    apply_specs(broker_proc.url, journal_spec("rate/changed"))
    append_pieces(broker_proc, "rate/changed")  # unlimited: no bucket, no credit saved up
    apply_specs(broker_proc.url, limited_spec("rate/changed"))
    assert append_pieces(broker_proc, "rate/changed") >= MIN_S
    assert write_head(broker_proc, "rate/changed") == 2 * TOTAL


def test_reapplied_spec_lifts_the_limit_for_later_appends(broker_proc):
    apply_specs(broker_proc.url, limited_spec("rate/lifted"), limited_spec("rate/still"))
    with broker_proc.client() as http:  # spend the lifted journal's burst credit under the limit
        http.put("/rate/lifted", content=b"z" * RATE).raise_for_status()
    apply_specs(broker_proc.url, journal_spec("rate/lifted"))
    lifted_done = threading.Event()
    lifted = threading.Thread(target=append_pieces, args=(broker_proc, "rate/lifted", lifted_done))
    lifted.start()
    assert append_pieces(broker_proc, "rate/still") >= MIN_S
    lifted_finished_first = lifted_done.is_set()
    lifted.join()
    assert lifted_finished_first, "the lifted journal was still held to its old rate"


def test_broker_rate_bounds_journals_with_and_without_a_spec_rate(tmp_path):
    proc = BrokerProcess(tmp_path / "d", None, "--broker.max-append-rate", str(RATE)).start()
    try:
        apply_specs(proc.url, journal_spec("rate/default"), limited_spec("rate/faster", RATE * 16))
        elapsed: dict[str, float] = {}
        threads = [threading.Thread(target=lambda n=name: elapsed.__setitem__(n, append_pieces(proc, n)))
                   for name in ("rate/default", "rate/faster")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert elapsed["rate/default"] >= MIN_S
        assert elapsed["rate/faster"] >= MIN_S
    finally:
        proc.kill()


def test_pacing_does_not_count_against_the_body_timeout(tmp_path):
    """An 8 MiB append held to 2 MiB/s takes ~3 s (past the socket buffers, so the
    client itself is held back), longer than a 1 s --body-timeout: the wait is the
    broker's own doing, so the append succeeds rather than a 408."""
    size = 8 << 20
    proc = BrokerProcess(tmp_path / "d", None, "--body-timeout", "1s").start()
    try:
        apply_specs(proc.url, limited_spec("rate/slow-body", rate=2 << 20))
        with proc.client(timeout=60) as http:
            resp = http.put("/rate/slow-body", content=b"x" * size)
        assert resp.status_code == 204, resp.text
        assert write_head(proc, "rate/slow-body") == size
    finally:
        proc.kill()

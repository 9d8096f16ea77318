"""Out of descriptors or disk: the request that met it gets a clear 503, nothing of
it is written, later requests succeed once the resource is back, and the broker
restarts (issue 19 §1, [I-APPEND-2], [I-RESTART-1]).

Real broker processes: descriptors run out under a small ``ulimit -n`` held full by
idle client connections; the disk is a 2 MiB tmpfs (`herald.testing.small_disk`).
"""

from __future__ import annotations

import httpx
import pytest

from herald.testing import BrokerProcess, apply_specs, journal_spec, wait_until
from herald.testing.small_disk import fill_disk

OPEN_FILES_LIMIT = 64


def _assert_exhausted(resp: httpx.Response, words: str) -> None:
    assert resp.status_code == 503, resp.text
    body = resp.json()
    assert body["status"] == "RESOURCE_EXHAUSTED" and words in body["message"], body
    assert "Traceback" not in resp.text


@pytest.fixture
def limited_broker(broker_factory):
    return broker_factory(open_files_limit=OPEN_FILES_LIMIT)


def test_append_out_of_descriptors_answers_503_writes_nothing_and_restart_works(limited_broker):
    name = "exhaust/fds"
    apply_specs(limited_broker.url, journal_spec(name))
    # Idle keep-alive connections, each holding one of the broker's descriptors, until
    # one is left: the append's own connection takes it, and its spool finds none.
    holders: list[httpx.Client] = []
    try:
        while limited_broker.open_descriptors < OPEN_FILES_LIMIT - 1:
            assert len(holders) < OPEN_FILES_LIMIT, "descriptors are not filling up"
            holder = limited_broker.client()
            holder.get("/debug/metrics").raise_for_status()  # accepted: its descriptor is open
            holders.append(holder)
        with limited_broker.client() as http:
            _assert_exhausted(http.put(f"/{name}", content=b"refused\n"), "out of file descriptors")
    finally:
        for holder in holders:
            holder.close()

    with limited_broker.client() as http:
        # Once the broker has closed the idle connections, the same append succeeds.
        accepted = wait_until(lambda: (r := http.put(f"/{name}", content=b"first\n")).status_code == 204 and r,
                              "an append accepted once descriptors are free again")
        assert accepted.headers["X-Commit-Begin"] == "0"  # the refused append wrote nothing

    limited_broker.kill()
    limited_broker.start()
    with limited_broker.client() as http:
        assert http.get(f"/{name}").content == b"first\n"
        assert http.put(f"/{name}", content=b"second\n").headers["X-Commit-Begin"] == str(len(b"first\n"))


def test_append_on_a_full_disk_answers_503_writes_nothing_and_restart_works(small_disk, tmp_path):
    name = "exhaust/disk"
    broker = BrokerProcess(small_disk / "data", tmp_path / "fragments").start()
    try:
        apply_specs(broker.url, journal_spec(name))
        with broker.client() as http:
            http.put(f"/{name}", content=b"before\n").raise_for_status()  # the spool's files exist
            # Room for part of the next append only: its write comes up short, then fails.
            # (1 MiB: past the zeros the first append grew the spool by, DATA_PAD_BYTES.)
            ballast = fill_disk(small_disk, leave=64 << 10)
            _assert_exhausted(http.put(f"/{name}", content=b"x" * (1 << 20)), "out of disk space")
            assert http.get(f"/{name}").content == b"before\n"

        broker.kill()
        broker.start()  # the disk still full: the broker starts and serves what it had
        with broker.client() as http:
            assert http.get(f"/{name}").content == b"before\n"
            ballast.unlink()
            after = http.put(f"/{name}", content=b"after\n")
            assert after.status_code == 204 and after.headers["X-Commit-Begin"] == str(len(b"before\n"))
            assert http.get(f"/{name}").content == b"before\nafter\n"
    finally:
        broker.kill()


def test_an_append_that_fits_is_taken_though_its_zero_padding_does_not(small_disk, tmp_path):
    """Small groups grow a spool in zeros ahead (herald.fragment.spool): on a nearly
    full disk the zeros are dropped, never the append that fits."""
    name = "exhaust/padding"
    broker = BrokerProcess(small_disk / "data", tmp_path / "fragments").start()
    try:
        apply_specs(broker.url, journal_spec(name))
        with broker.client() as http:
            first = b"a" * (300 << 10)  # a large group: written without padding
            http.put(f"/{name}", content=first).raise_for_status()
            fill_disk(small_disk, leave=64 << 10)  # less room than the padding
            assert http.put(f"/{name}", content=b"small\n").status_code == 204
            assert http.get(f"/{name}").content == first + b"small\n"
    finally:
        broker.kill()

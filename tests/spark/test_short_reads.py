"""A planned range is read whole or not at all (`herald.spark.reading.read_through`):
a broker that ends a read below the range's end — a replica still filling a hole
after a fail-over answers 416 — is asked again, and a range it never serves fails
the task. Before, the read ended quietly and the slice was recorded as read: its
missing messages were skipped for good (a lost chunk in stream-sum's crash test)."""

from __future__ import annotations

import re
import threading

import httpx
import pytest

from herald.protocol.errors import HeraldError
from herald.spark.reading import read_through
from herald.testing import make_journals, wait_until


def not_yet_available(url: str) -> float:
    found = re.search(r'herald_broker_requests_total{op="read",status="OFFSET_NOT_YET_AVAILABLE"} ([0-9.e+]+)',
                      httpx.get(f"{url}/metrics").text)
    return float(found.group(1)) if found else 0.0


def test_a_range_the_broker_serves_late_is_read_whole(broker, client):
    [journal] = make_journals(broker, "short/late")
    client.append(journal, b"one\ntwo\n")
    end = client.write_head(journal) + len(b"three\n")  # planned past what the broker serves now
    before = not_yet_available(broker.url)
    got: dict = {}
    reading = threading.Thread(target=lambda: got.update(chunks=list(read_through(client, journal, 0, end))),
                               daemon=True)
    reading.start()
    wait_until(lambda: not_yet_available(broker.url) > before, "the broker refusing the range's end")
    client.append(journal, b"three\n")
    reading.join(60)
    assert b"".join(chunk for _, chunk in got["chunks"]) == b"one\ntwo\nthree\n"


def test_a_range_never_served_fails_instead_of_being_skipped(broker, client):
    [journal] = make_journals(broker, "short/never")
    client.append(journal, b"one\n")
    with pytest.raises(HeraldError, match=r"committed bytes \[4, 10\) were not served"):
        list(read_through(client, journal, 0, 10, deadline_s=0.5))

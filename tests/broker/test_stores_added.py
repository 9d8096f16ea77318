"""A store added to a journal's spec is listed before the journal appends again
(real broker processes over a real file store; gazette-facts §8.2).

A journal opened with no fragment stores counts as listed: there is nothing to
list. When a later spec gave it a store, it kept appending at its own head while
the store could hold fragments written elsewhere (another broker, a restored
backup), past that head: appends landed at offsets persisted bytes already
covered, until a listing a ``refresh_interval`` later. Now a store new to the
spec makes the journal unlisted again: appends are refused with
FRAGMENT_STORE_UNHEALTHY naming the store until a listing answers, and the next
append lands past every persisted byte.
"""

from __future__ import annotations

import time

import httpx

from herald.client.transient import Backoff
from herald.fragment.stores import list_fragments, open_store
from herald.testing import apply_specs, journal_spec

JOURNAL = "added/journal"
LINES = [b'{"n": %d, "from": "elsewhere", "pad": "%s"}\n' % (i, b"x" * 300) for i in range(12)]
DEADLINE_S = 30.0


def test_a_store_added_to_the_spec_is_listed_before_the_next_append(tmp_path, broker_factory):
    store_root = tmp_path / "store"
    elsewhere = broker_factory(tmp_path / "data-elsewhere", store_root)
    apply_specs(elsewhere.url, journal_spec(JOURNAL, length=1024))
    with elsewhere.client() as http:
        for line in LINES:
            http.put(f"/{JOURNAL}", content=line).raise_for_status()
    assert elsewhere.terminate() == 0  # a clean stop persists every spool
    persisted = list_fragments(open_store("file:///", store_root), JOURNAL)
    persisted_end = max(f.end for f in persisted)
    assert persisted_end == sum(map(len, LINES))

    broker = broker_factory(tmp_path / "data", store_root)
    apply_specs(broker.url, journal_spec(JOURNAL, stores=[]))
    with broker.client() as http:
        http.put(f"/{JOURNAL}", content=b'{"local": true}\n').raise_for_status()
        apply_specs(broker.url, journal_spec(JOURNAL, length=1024))  # now with the store
        resp, refusals = _append_until_accepted(http, b'{"after": "the store"}\n')
        assert resp.status_code == 204, resp.text
        assert int(resp.headers["X-Commit-Begin"]) >= persisted_end, (
            f"appended at {resp.headers['X-Commit-Begin']}, over persisted bytes up to {persisted_end}")
        for refusal in refusals:  # appends refused while unlisted say why, naming the store
            assert refusal["status"] == "FRAGMENT_STORE_UNHEALTHY" and "file:///" in refusal["message"]
        last = persisted_end - len(LINES[-1])
        read = http.get(f"/{JOURNAL}", params={"offset": last, "end_offset": persisted_end})
        assert read.status_code == 206 and read.content == LINES[-1], read.text


def _append_until_accepted(http: httpx.Client, content: bytes) -> tuple[httpx.Response, list[dict]]:
    """PUT until not refused as retryable (503), with the clients' back-off; the
    response and the refusals' bodies."""
    backoff, refusals, deadline = Backoff(), [], time.monotonic() + DEADLINE_S
    while True:
        resp = http.put(f"/{JOURNAL}", content=content)
        if resp.status_code != 503 or time.monotonic() > deadline:
            return resp, refusals
        refusals.append(resp.json())
        backoff.wait()

"""A journal's first store goes away (the SeaweedFS process is stopped) and comes
back on the same port and data: appends fail with FRAGMENT_STORE_UNHEALTHY after a
bounded wait, acknowledged spools stay on local disk, and the broker recovers by
itself with nothing lost (gazette-facts §4.6; [I-APPEND-3], [I-FRAG-1])."""

from __future__ import annotations

import shutil
import threading
import time
from urllib.parse import quote

from herald.testing import apply_specs, journal_spec, wait_until
from tests.broker.s3_helpers import (
    WAIT_DEADLINE_S,
    fragments,
    persisted_through,
    put,
    read_range,
    record,
    s3_spec,
)

JOURNAL, LOCAL = "health/journal", "health/local-only"


def append_until_refused(http, acked: bytes, first: int) -> tuple[bytes, dict]:
    """Append records until the broker refuses one (each append rolls the spool
    before it, and that upload fails); returns (acked, error body)."""
    deadline, i, pace = time.monotonic() + WAIT_DEADLINE_S, first, threading.Event()
    while time.monotonic() < deadline:
        resp = put(http, JOURNAL, record(i))
        if resp.status_code != 204:
            return acked, resp.json() | {"http": resp.status_code}
        acked += record(i)
        i += 1
        pace.wait(0.1)  # pacing, not synchronisation: fewer spools to upload later
    raise AssertionError("appends never refused while the store is down")


def test_unhealthy_store_refuses_appends_then_recovers_with_nothing_lost(
        seaweedfs_factory, broker_factory, tmp_path):
    server = seaweedfs_factory()
    broker = broker_factory(tmp_path / "d1", None, env=server.env)
    apply_specs(broker.url, s3_spec(server, JOURNAL, "health"),
                journal_spec(LOCAL, stores=[]))
    acked = b""
    with broker.client(timeout=60) as http:
        for i in range(3):
            assert put(http, JOURNAL, record(i)).status_code == 204
            acked += record(i)
        persisted_through(http, JOURNAL, 2 * len(record(0)))

        server.stop()
        acked, error = append_until_refused(http, acked, first=3)
        assert error["http"] == 503 and error["status"] == "FRAGMENT_STORE_UNHEALTHY"
        assert server.store_url("health") in error["message"]
        # Acknowledged but unpersisted spools are kept on local disk...
        spool_dir = tmp_path / "d1" / "spools" / quote(JOURNAL, safe="")
        assert any(p.stat().st_size for p in spool_dir.iterdir())
        local = [i["fragment"] for i in fragments(http, JOURNAL) if not i["fragment"]["backing_store"]]
        first_local = min(f["begin"] for f in local)
        assert read_range(http, JOURNAL, first_local) == acked[first_local:]
        # ...and a journal with no stores is local-only: not gated on any store.
        assert put(http, LOCAL, b"still writable\n").status_code == 204

        server.start()  # same ports, same data
        resp = wait_until(lambda: (r := put(http, JOURNAL, b"after recovery\n")).status_code == 204
                          and r, "appends accepted again after the store came back")
        assert resp.headers["X-Commit-Begin"] == str(len(acked))
        acked += b"after recovery\n"
        persisted_through(http, JOURNAL, len(acked) - len(b"after recovery\n"))
        assert read_range(http, JOURNAL) == acked

    # Nothing lost: a broker on an empty disk reads every byte back from the bucket.
    assert broker.terminate() == 0
    shutil.rmtree(tmp_path / "d1")
    cold = broker_factory(tmp_path / "d2", None, env=server.env)
    apply_specs(cold.url, s3_spec(server, JOURNAL, "health"))
    with cold.client() as http:
        assert read_range(http, JOURNAL) == acked

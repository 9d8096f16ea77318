"""[I-APPEND-1] concurrent appends of random sizes never interleave (seeded fuzz)."""

from __future__ import annotations

import concurrent.futures as cf
import random

from herald.testing import apply_specs, journal_spec


def test_random_concurrent_appends_never_interleave(broker):
    apply_specs(broker.url, journal_spec("fuzz/journal", length=4096))
    rng = random.Random(20261122)
    bodies = []
    for i in range(200):
        tag = f"<{i:04d}:".encode()
        bodies.append(tag + bytes([65 + i % 26]) * rng.randint(0, 20_000) + b">\n")

    def put(body):
        with broker.client() as http:
            resp = http.put("/fuzz/journal", content=body)
            return int(resp.headers["X-Commit-Begin"]), int(resp.headers["X-Commit-End"]), body

    with cf.ThreadPoolExecutor(16) as pool:
        commits = list(pool.map(put, bodies))
    with broker.client() as http:
        journal = http.get("/fuzz/journal").content
    assert len(journal) == sum(map(len, bodies))
    for begin, end, body in commits:
        assert journal[begin:end] == body  # each landed whole, where its ack said
    spans = sorted((b, e) for b, e, _ in commits)
    assert all(prev[1] == nxt[0] for prev, nxt in zip(spans, spans[1:]))  # no gaps/overlaps

"""Thousands of journals on one broker under the common ``ulimit -n 1024`` (issue 19 §1): the issue's 10,000.

The broker opens a spool's descriptors when the journal is written and closes the
least recently used idle ones when over its budget (`herald.fragment.fdpool`), so
the number of journals it serves is not bounded by its descriptor limit, and a
restart over all of them works.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from herald.testing import journal_spec

OPEN_FILES_LIMIT = 1024
JOURNALS = 10_000
WORKERS = 8

pytestmark = pytest.mark.slow


def _names(count: int) -> list[str]:
    return [f"many/j{i:05d}" for i in range(count)]


def _each(url: str, names: list[str], request) -> list[httpx.Response]:
    """``request(client, name)`` for every name, on a few threads; responses in order."""
    with httpx.Client(base_url=url, timeout=60) as http, ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(lambda name: request(http, name), names))


@pytest.fixture
def limited_broker(broker_factory):
    return broker_factory(open_files_limit=OPEN_FILES_LIMIT)


def test_10000_journals_under_ulimit_1024_append_restart_and_read(limited_broker):
    names = _names(JOURNALS)
    specs = [journal_spec(name) for name in names]
    applied = httpx.post(f"{limited_broker.url}/v1/journals/apply", timeout=120,
                         json={"changes": [{"upsert": s} for s in specs]})
    assert applied.status_code == 200, applied.text

    appended = _each(limited_broker.url, names, lambda http, n: http.put(f"/{n}", content=f"{n}\n".encode()))
    assert [r.status_code for r in appended] == [204] * JOURNALS
    assert limited_broker.open_descriptors < OPEN_FILES_LIMIT // 2  # the pool's budget held

    limited_broker.kill()
    limited_broker.start()  # raises if the broker cannot start again
    read = _each(limited_broker.url, names, lambda http, n: http.get(f"/{n}"))
    assert [(r.status_code, r.content) for r in read] == [(206, f"{n}\n".encode()) for n in names]

    again = _each(limited_broker.url, names[:100], lambda http, n: http.put(f"/{n}", content=b"again\n"))
    assert [r.headers.get("X-Commit-Begin") for r in again] == [str(len(n) + 1) for n in names[:100]]

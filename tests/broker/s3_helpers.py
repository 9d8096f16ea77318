"""Helpers shared by the broker tests that run over an s3:// store on SeaweedFS."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from herald.testing import journal_spec

WAIT_DEADLINE_S = 60.0
_PAUSE_S = 0.1


def s3_spec(server, name: str, prefix: str, **fragment) -> dict:
    """Small fragments (every append above 1 KiB rolls the spool at the next one)."""
    fragment.setdefault("length", 1024)
    return journal_spec(name, stores=[server.store_url(prefix)], **fragment)


def record(i: int) -> bytes:
    return f"{i:05d} {'x' * 1500}\n".encode()


def put(http: httpx.Client, journal: str, body: bytes) -> httpx.Response:
    return http.put(f"/{journal}", content=body)


def read_range(http: httpx.Client, journal: str, begin: int = 0, end: int = 0) -> bytes:
    params = {"offset": begin, **({"end_offset": end} if end else {})}
    resp = http.get(f"/{journal}", params=params)
    assert resp.status_code in (206, 416), resp.text
    return resp.content if resp.status_code == 206 else b""


def fragments(http: httpx.Client, journal: str, ttl_s: float = 0) -> list[dict]:
    resp = http.post("/v1/journals/fragments", json={"journal": journal, "signature_ttl": ttl_s})
    resp.raise_for_status()
    return resp.json()["fragments"]


def wait_until(predicate: Callable[[], object], what: str,
               deadline_s: float = WAIT_DEADLINE_S) -> object:
    """Re-check ``predicate`` until it is truthy; fail loudly at the deadline."""
    pause = threading.Event()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if result := predicate():
            return result
        pause.wait(_PAUSE_S)
    raise AssertionError(f"timed out after {deadline_s}s waiting for {what}")


def wait_persisted(http: httpx.Client, journal: str, end: int) -> list[dict]:
    """Fragments once every byte below ``end`` is in a persisted fragment."""
    def persisted():
        items = fragments(http, journal)
        covered = max([i["fragment"]["end"] for i in items if i["fragment"]["backing_store"]],
                      default=0)
        return items if covered >= end else None
    return wait_until(persisted, f"{journal} persisted up to {end}")  # type: ignore[return-value]

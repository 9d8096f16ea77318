"""Helpers shared by the broker tests that run over an s3:// store on SeaweedFS."""

from __future__ import annotations

import httpx

from herald.client import BrokerClient, FragmentInfo
from herald.testing import journal_spec, wait_persisted

WAIT_DEADLINE_S = 60.0


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


def persisted_through(http: httpx.Client, journal: str, end: int) -> list[FragmentInfo]:
    """`herald.testing.wait_persisted` for a test holding the broker's httpx client."""
    with BrokerClient(str(http.base_url)) as client:
        return wait_persisted(client, journal, through=end, deadline_s=WAIT_DEADLINE_S)

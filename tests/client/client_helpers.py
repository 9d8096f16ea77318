"""Helpers for client tests (importable: ``from client_helpers import create``)."""

from __future__ import annotations

import time

from herald.client import BrokerClient, FragmentInfo
from herald.keyspace.base import Change
from herald.protocol.journal import JournalSpec
from herald.testing import journal_spec

DEADLINE_S = 30.0


def create(client: BrokerClient, name: str, **fragment) -> JournalSpec:
    spec = JournalSpec.from_dict(journal_spec(name, **fragment))
    client.apply([Change(-1, upsert=spec)])
    return spec


def wait_persisted(client: BrokerClient, journal: str, count: int) -> list[FragmentInfo]:
    """Poll (with a deadline) until ``count`` fragments are persisted: uploads are
    asynchronous and the broker has no event for them."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        infos = client.fragments(journal, signature_ttl_s=60)
        persisted = [i for i in infos if i.fragment.is_persisted]
        if len(persisted) >= count:
            return infos
        if time.monotonic() > deadline:
            raise AssertionError(f"{journal}: only {len(persisted)} of {count} fragments persisted")
        time.sleep(0.05)  # wait-ok: polling with a deadline; uploads have no event


def metric(client: BrokerClient, name: str, journal: str | None = None) -> float:
    """Sum of a Prometheus sample from the broker's /debug/metrics."""
    text = client.http.get("/debug/metrics").text
    total = 0.0
    for line in text.splitlines():
        ours = journal is None or f'journal="{journal}"' in line
        if line.startswith((name + "{", name + " ")) and ours:
            total += float(line.rsplit(" ", 1)[1])
    return total

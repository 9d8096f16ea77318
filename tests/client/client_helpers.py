"""Helpers for client tests (importable: ``from client_helpers import create``)."""

from __future__ import annotations

from herald.client import BrokerClient
from herald.keyspace.base import Change
from herald.protocol.journal import JournalSpec
from herald.testing import journal_spec

DEADLINE_S = 30.0


def create(client: BrokerClient, name: str, **fragment) -> JournalSpec:
    spec = JournalSpec.from_dict(journal_spec(name, **fragment))
    client.apply([Change(-1, upsert=spec)])
    return spec


def metric(client: BrokerClient, name: str, journal: str | None = None) -> float:
    """Sum of a Prometheus sample from the broker's /debug/metrics."""
    text = client.http.get("/debug/metrics").text
    total = 0.0
    for line in text.splitlines():
        ours = journal is None or f'journal="{journal}"' in line
        if line.startswith((name + "{", name + " ")) and ours:
            total += float(line.rsplit(" ", 1)[1])
    return total

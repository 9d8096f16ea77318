"""Journals and messages for tests: labelled test journals, and a producer whose
transactions a test drives by hand (commit, leave pending, duplicate, ACK)."""

from __future__ import annotations

import os
import time
from typing import Any

from herald.client import BrokerClient
from herald.message import AckIntent, Clock, NDJSONFraming, ProducerID, PublisherCore
from herald.testing.broker import BrokerProcess, apply_specs, journal_spec

__all__ = ["Producer", "make_journals"]

NDJSON = NDJSONFraming()


def make_journals(broker: BrokerProcess, *names: str, labels: dict[str, str] | None = None,
                  **fragment: Any) -> list[str]:
    """Apply a test spec for each name, with extra ``labels``; returns the names."""
    specs = []
    for name in names:
        spec = journal_spec(name, **fragment)
        spec["labels"] += [{"name": k, "value": v} for k, v in (labels or {}).items()]
        specs.append(spec)
    apply_specs(broker.url, *specs)
    return list(names)


class Producer:
    """A publisher writing straight to journals, one append per call."""

    def __init__(self, client: BrokerClient) -> None:
        self.client = client
        self.core = PublisherCore(ProducerID.new(os.urandom(6)), Clock.from_unix_ns(time.time_ns()))

    def committed(self, journal: str, *bodies: dict[str, Any]) -> bytes:
        data = b"".join(self.core.stamp_committed(journal, NDJSON, b) for b in bodies)
        self.client.append(journal, data)
        return data

    def uncommitted(self, journal: str, *bodies: dict[str, Any], send: bool = True) -> bytes:
        data = b"".join(self.core.stamp_uncommitted(journal, NDJSON, b) for b in bodies)
        if send:
            self.client.append(journal, data)
        return data

    def ack(self, send: bool = True) -> list[AckIntent]:
        intents = self.core.build_ack_intents()
        if send:
            for intent in intents:
                self.client.append(intent.journal, intent.data)
        return intents

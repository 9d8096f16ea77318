"""`Publisher`: Gazette's Publisher as an I/O driver over `AppendService`.

`herald.message.PublisherCore` is pure (stamping, ACK intents); this module adds
what a running publisher needs: the journal list (from a `WatchedList` or a fixed
list), a mapping from a message key to a journal, the framing named by each
journal's ``content-type`` label, and the wall clock. The order of one publish is
Gazette's (gazette-facts §3): map → take the journal's append slot → tick the
clock and frame → write, so UUID order is write order within each journal.

    with BrokerClient(url) as client, AppendService(client) as service:
        pub = Publisher(service, journals=["events/part-000", "events/part-001"])
        pub.publish_committed(b"ajs-123", {"messageId": "ajs-123", "type": "page"})
        pub.flush()

Transactions: `publish_uncommitted` messages become visible when the ACKs from
`build_ack_intents` are written (`write_ack_intents`); a recovering producer
re-writes its last recorded intents, which rolls back what it published after them.

Blocking only in `flush`; `publish_*` return a future of the batch's
`AppendResult`. Not thread-safe (one PublisherCore, one clock), as in Gazette.
"""

from __future__ import annotations

import os
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from herald.client.append import AppendService
from herald.client.models import JournalInfo
from herald.client.watch import WatchedList
from herald.message import (
    AckIntent,
    Clock,
    Framing,
    NDJSONFraming,
    ProducerID,
    PublisherCore,
    framing_for_labels,
    mapping_by_name,
)

__all__ = ["Publisher"]


def _framings(infos: Sequence[JournalInfo], uuid_field: str) -> dict[str, Framing]:
    return {info.name: framing_for_labels(info.spec.labels, uuid_field) for info in infos}


class Publisher:
    """Publishes messages to the journals of a partition list, keyed by a mapping.

    ``journals`` is a `WatchedList` (journals joining or leaving are picked up), a
    list of `JournalInfo`, or a list of names (then NDJSON is assumed). ``now_ns``
    is the wall clock, an argument so tests can drive it.
    """

    def __init__(self, service: AppendService, journals: WatchedList | Sequence[JournalInfo] | Sequence[str],
                 mapping: str = "modulo", producer: bytes | None = None,
                 now_ns: Callable[[], int] = time.time_ns, rnd: random.Random | None = None,
                 uuid_field: str = "UUID") -> None:
        self._rnd = rnd or random.Random()
        self._map = mapping_by_name(mapping, self._rnd)
        self._random = mapping_by_name("random", self._rnd)
        self.uuid_field = uuid_field
        self.service, self.mapping, self.now_ns = service, mapping, now_ns
        self.core = PublisherCore(producer or ProducerID.new(os.urandom(6)), Clock.from_unix_ns(now_ns()))
        self._source = journals
        self._names: list[str] = []
        self._framings: Mapping[str, Framing] = {}
        self._seen: object = None
        self.published = 0

    @property
    def producer(self) -> bytes:
        return self.core.producer

    def _partitions(self) -> tuple[list[str], Mapping[str, Framing]]:
        """The current journal names (sorted) and framings; re-derived only when the
        watched snapshot changes, so a publish costs no list copy."""
        src = self._source
        infos: Any = src.infos if isinstance(src, WatchedList) else src
        if infos is not self._seen:
            self._seen = infos
            if infos and isinstance(infos[0], str):
                self._framings = {name: NDJSONFraming(self.uuid_field) for name in infos}
            else:
                self._framings = _framings(infos, self.uuid_field)
            self._names = sorted(self._framings)
        return self._names, self._framings

    def journal_for(self, key: bytes) -> str:
        """The journal ``key`` maps to now. Raises NoJournalsError on an empty list."""
        names, _ = self._partitions()
        return self._map(key, names)

    def publish_committed(self, key: bytes, body: Any) -> Future:
        """Publish ``body`` (a dict or JSON-object bytes for NDJSON) under ``key``'s
        journal with an OUTSIDE_TXN UUID drawn while holding the journal's slot."""
        journal = self.journal_for(key)
        framing = self._framings[journal]
        with self.service.start_append(journal) as slot:
            self.core.clock.update(self.now_ns())
            slot.write(self.core.stamp_committed(journal, framing, body))
        self.published += 1
        return slot.future

    def publish_uncommitted(self, key: bytes, body: Any) -> Future:
        """Publish ``body`` as part of this producer's open transaction (CONTINUE_TXN).

        Readers see it only once a later ACK of this producer commits it; re-appending
        the previous ACK intents instead rolls it back. Not thread-safe (Gazette's rule).
        """
        journal = self.journal_for(key)
        framing = self._framings[journal]
        with self.service.start_append(journal) as slot:
            self.core.clock.update(self.now_ns())
            slot.write(self.core.stamp_uncommitted(journal, framing, body))
        self.published += 1
        return slot.future

    def publish_uncommitted_batch(self, items: Iterable[tuple[bytes | None, Any]]) -> set[Future]:
        """Publish many ``(key, body)`` as this producer's open transaction, holding
        each journal's slot once per call (the Spark sink's path: no per-row lock).
        A ``None`` key goes to a random journal. Per journal, stamp order is write
        order. Returns the futures of the batches written to."""
        names, framings = self._partitions()
        by_journal: dict[str, list[Any]] = defaultdict(list)
        for key, body in items:
            by_journal[(self._random if key is None else self._map)(key or b"", names)].append(body)
        self.core.clock.update(self.now_ns())
        futures = set()
        for journal, bodies in by_journal.items():
            framing, stamp = framings[journal], self.core.stamp_uncommitted
            with self.service.start_append(journal) as slot:
                for body in bodies:
                    slot.write(stamp(journal, framing, body))
            futures.add(slot.future)
            self.published += len(bodies)
        return futures

    def publish_uncommitted_framed(self, journal: str, n: int,
                                   frame: Callable[[np.ndarray], Sequence[bytes | memoryview]]) -> Future:
        """Publish ``n`` messages to ``journal`` in one slot hold, framed by the
        caller: ``frame(uuids)`` gets their CONTINUE_TXN UUIDs (n × 16 uint8, stamped
        while the slot is held, so UUID order is write order) and returns the ``n``
        framed messages as buffers to be joined, handed over to the batch uncopied
        (`AppendSlot.write_owned`: the caller never changes them; the Spark sink's
        bulk path, whose buffers are Arrow results)."""
        framing = self._framings[journal]
        with self.service.start_append(journal) as slot:
            self.core.clock.update(self.now_ns())
            for piece in frame(self.core.stamp_uncommitted_uuids(journal, framing, n)):
                slot.write_owned(piece)
        self.published += n
        return slot.future

    def partitions(self) -> tuple[list[str], Mapping[str, Framing]]:
        """The journal names (sorted, as mappings index them) and their framings."""
        return self._partitions()

    def build_ack_intents(self) -> list[AckIntent]:
        """The ACKs that commit everything published uncommitted since the last call.

        Record them durably (a checkpoint) *before* `write_ack_intents`; after a crash,
        re-writing the last recorded intents rolls back anything published after them.
        """
        self.core.clock.update(self.now_ns())
        return self.core.build_ack_intents()

    def write_ack_intents(self, intents: Sequence[AckIntent]) -> list[Future]:
        """Append each intent to its journal (after what was published there)."""
        futures = []
        for intent in intents:
            with self.service.start_append(intent.journal) as slot:
                slot.write(intent.data)
            futures.append(slot.future)
        return futures

    def flush(self, timeout_s: float | None = None) -> None:
        """Block until everything published so far is durable (or failed)."""
        self.service.flush(timeout_s)

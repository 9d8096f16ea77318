"""The pure core of Gazette's Publisher: stamping UUIDs and building ACK intents.

I/O drivers (appending to journals) wrap this. The order of a publish is
Gazette's (gazette-facts §3): pick the journal, take that journal's append slot
(so writes to it are serialised), *then* stamp — tick the clock and frame the
message — so UUID order equals write order even under concurrency. Stamping
before the slot is held could let a later clock be written before an earlier
one, and readers would drop the earlier one as a duplicate.

Exactly-once publishing from a transaction::

    core.stamp_uncommitted(journal, framing, body)   # CONTINUE_TXN, any number
    intents = core.build_ack_intents()              # ACK_TXN per journal
    # checkpoint the intents durably, THEN append each intent.data to intent.journal;
    # after a crash, re-append the last checkpointed intents (rolls back the rest).

The clock is the caller's: a plain publisher calls ``clock.update(now_ns)``
before each publish (Gazette's auto-update); a consumer updates it once per
transaction. Reading the time is the driver's job, never this module's.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from herald.message.framing import Framing
from herald.message.intents import AckIntent
from herald.message.uuid import ACK_TXN, CONTINUE_TXN, OUTSIDE_TXN, Clock, build_uuid, uuid_suffix
from herald.protocol.errors import ValidationError

__all__ = ["AckIntent", "PublisherCore"]

_pack_head = struct.Struct(">IHH").pack
_UUID_HEAD = np.dtype([("low", ">u4"), ("mid", ">u2"), ("hi", ">u2"), ("suffix", "V8")])
_TICK, _U64 = 160, (1 << 64) - 1


class PublisherCore:
    """One producer's stamping state. Not thread-safe: ``stamp_uncommitted`` and
    ``build_ack_intents`` belong to one transaction loop (as in Gazette)."""

    __slots__ = ("producer", "clock", "_intents")

    def __init__(self, producer: bytes, clock: Clock) -> None:
        if len(producer) != 6:
            raise ValidationError("producer", f"want 6 bytes, got {len(producer)}")
        self.producer = bytes(producer)
        self.clock = clock
        self._intents: dict[str, Framing] = {}  # First-publish order (dicts keep it).

    def next_uuid(self, flags: int) -> bytes:
        """Tick the clock and build this producer's UUID: ``build_uuid`` with the
        clock tick inlined, as this is the publishing hot path."""
        clock = self.clock.value = (self.clock.value + _TICK) & _U64
        t = clock >> 4
        suffix = uuid_suffix(self.producer, ((clock & 0xF) << 10) | flags)
        return _pack_head(t & 0xFFFFFFFF, (t >> 32) & 0xFFFF, (t >> 48) | 0x1000) + suffix

    def next_uuids(self, n: int, flags: int) -> np.ndarray:
        """``n`` consecutive `next_uuid` s at once, as an n × 16 uint8 array (the
        clock ticks ``n`` times). The bulk publishing path's stamping."""
        start = self.clock.value
        if n <= 0:
            return np.zeros((0, 16), dtype=np.uint8)
        if start + n * _TICK > _U64:  # Wraps (never in practice): one at a time.
            return np.frombuffer(b"".join(self.next_uuid(flags) for _ in range(n)), np.uint8).reshape(n, 16)
        clocks = np.uint64(start) + np.arange(1, n + 1, dtype=np.uint64) * np.uint64(_TICK)
        self.clock.value = int(clocks[-1])
        t = clocks >> np.uint64(4)
        out = np.empty(n, dtype=_UUID_HEAD)
        out["low"] = t & np.uint64(0xFFFFFFFF)
        out["mid"] = (t >> np.uint64(32)) & np.uint64(0xFFFF)
        out["hi"] = (t >> np.uint64(48)) | np.uint64(0x1000)
        out["suffix"] = uuid_suffix(self.producer, ((start & 0xF) << 10) | flags)  # Ticks keep the counter.
        return out.view(np.uint8).reshape(n, 16)

    def stamp_uncommitted_uuids(self, journal: str, framing: Framing, n: int) -> np.ndarray:
        """`stamp_uncommitted` for ``n`` messages the caller frames itself: their
        CONTINUE_TXN UUIDs (n × 16), remembering ``journal`` for the ACK intents.
        Call only while holding ``journal``'s append slot."""
        self._intents.setdefault(journal, framing)
        return self.next_uuids(n, CONTINUE_TXN)

    def stamp_committed(self, journal: str, framing: Framing, body: Any) -> bytes:
        """Frame ``body`` with an OUTSIDE_TXN UUID (commits on its own). Call only
        while holding ``journal``'s append slot, so UUID order is write order."""
        return framing.encode(body, self.next_uuid(OUTSIDE_TXN))

    def stamp_uncommitted(self, journal: str, framing: Framing, body: Any) -> bytes:
        """Frame ``body`` with a CONTINUE_TXN UUID, pending a later ACK; remembers
        ``journal`` (and its framing) for ``build_ack_intents``. Call only while
        holding ``journal``'s append slot."""
        data = framing.encode(body, self.next_uuid(CONTINUE_TXN))
        self._intents.setdefault(journal, framing)
        return data

    def pending_journals(self) -> list[str]:
        """Journals published to uncommitted since the last ``build_ack_intents``."""
        return list(self._intents)

    def build_ack_intents(self) -> list[AckIntent]:
        """One ACK_TXN message per journal published to (first-publish order),
        each with a fresh clock tick; clears the tracking."""
        out = []
        for journal, framing in self._intents.items():
            uuid = build_uuid(self.producer, self.clock.tick(), ACK_TXN)  # Ticks in order, like Gazette.
            out.append(AckIntent(journal, framing.encode(framing.ack_body(), uuid)))
        self._intents = {}
        return out

"""A Sequencer's state as JSON: what a consumer checkpoint keeps so that reading
resumes exactly where a committed transaction left off (Spark stores it with
each micro-batch). Validating ``from_dict`` names the bad field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from herald.message.uuid import ProducerID
from herald.protocol.errors import ValidationError

__all__ = ["Checkpoint", "ProducerState"]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """What a checkpoint keeps of one journal + producer: the last ACK clock and
    the offset where its open span began (-1 if none)."""

    journal: str
    producer: bytes
    last_ack: int
    begin: int

    def to_dict(self) -> dict[str, Any]:
        return {"journal": self.journal, "producer": self.producer.hex(), "last_ack": self.last_ack,
                "begin": self.begin}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], field: str = "state") -> ProducerState:
        if not isinstance(d, Mapping):
            raise ValidationError(field, "want an object")
        journal = d.get("journal")
        if not isinstance(journal, str) or not journal:
            raise ValidationError(f"{field}.journal", "want a non-empty string")
        try:
            producer = ProducerID.from_hex(d.get("producer") or "")
        except (ValueError, TypeError) as exc:
            raise ValidationError(f"{field}.producer", f"want 12 hex digits ({exc})") from None
        last_ack, begin = d.get("last_ack"), d.get("begin")
        if type(last_ack) is not int or not 0 <= last_ack < 1 << 64:
            raise ValidationError(f"{field}.last_ack", f"want a uint64 clock, got {last_ack!r}")
        if type(begin) is not int or begin < -1:
            raise ValidationError(f"{field}.begin", f"want an offset or -1, got {begin!r}")
        return cls(journal, bytes(producer), last_ack, begin)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Sequencer state as a JSON-able dict: read-through offsets per journal and
    producer states. Spark streaming stores it with each batch."""

    offsets: Mapping[str, int]
    states: tuple[ProducerState, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"offsets": dict(self.offsets), "states": [s.to_dict() for s in self.states]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], field: str = "checkpoint") -> Checkpoint:
        if not isinstance(d, Mapping):
            raise ValidationError(field, "want an object")
        offsets = d.get("offsets", {})
        if not isinstance(offsets, Mapping):
            raise ValidationError(f"{field}.offsets", "want an object of journal: offset")
        for journal, offset in offsets.items():
            if type(offset) is not int or offset < 0:
                raise ValidationError(f"{field}.offsets[{journal}]", f"want an offset >= 0, got {offset!r}")
        states = d.get("states", [])
        if not isinstance(states, list):
            raise ValidationError(f"{field}.states", "want a list")
        parsed = tuple(ProducerState.from_dict(s, f"{field}.states[{i}]") for i, s in enumerate(states))
        return cls(dict(offsets), parsed)

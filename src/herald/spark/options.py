"""The options of format ``herald``, parsed once into a frozen, picklable value.

Spark hands a data source its options as a case-insensitive ``str → str`` map;
`HeraldOptions.parse` validates them at the edge (errors name the option) so a
bad option fails when the query is defined, not inside a task.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from herald.client import BrokerClient, ClientSecurity
from herald.message import MAPPINGS
from herald.message.decode_errors import DecodeErrors, OnDecodeError
from herald.protocol.errors import ValidationError
from herald.protocol.labels import LabelSelector

__all__ = ["HeraldOptions"]

_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no"}


def _get(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    lowered = {k.lower(): v for k, v in options.items()}
    return lowered.get(name.lower(), default)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = _get(options, name)
    if text is None:
        return default
    if text.strip().lower() in _TRUE:
        return True
    if text.strip().lower() in _FALSE:
        return False
    raise ValidationError(name, f"want true or false, got {text!r}")


def _int(options: Mapping[str, str], name: str, default: int) -> int:
    text = _get(options, name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValidationError(name, f"want an integer, got {text!r}") from None
    if value < 0:
        raise ValidationError(name, f"want >= 0, got {value}")
    return value


def _starting(text: str | None) -> str | dict[str, int]:
    if text is None or text.strip().lower() in ("", "earliest"):
        return "earliest"
    if text.strip().lower() == "latest":
        return "latest"
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        raise ValidationError("startingOffsets", f"want earliest, latest or a JSON object, got {text!r}") from None
    if not isinstance(doc, dict) or not all(isinstance(v, int) and v >= -2 for v in doc.values()):
        raise ValidationError("startingOffsets", "want a JSON object of journal: offset (-1 latest, -2 earliest)")
    return {str(k): int(v) for k, v in doc.items()}


@dataclass(frozen=True, slots=True)
class HeraldOptions:
    """Everything a reader or writer task needs (settings only: clients are built
    inside the task). ``state_location`` is a local directory: the reader's
    sequencer snapshots and the sink's intent records live under it."""

    broker: str
    selector: str
    committed: bool
    uuid_field: str = "UUID"
    starting: str | dict[str, int] = "earliest"
    max_bytes_per_trigger: int = 0
    state_location: str = ""
    mapping: str = "modulo"
    include_acks: bool = False
    fence_register: str = "herald-sink"
    ring_size: int = 65536
    append_bytes: int = 1 << 20
    split_bytes: int = 0
    max_partition_bytes: int = 64 << 20
    security: ClientSecurity = ClientSecurity()
    on_decode_error: OnDecodeError = OnDecodeError.FAIL

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> HeraldOptions:
        """Validate Spark's options; ``committed`` defaults to true for streams and
        false for batch reads (a batch read is usually an audit of raw bytes)."""
        broker = _get(options, "broker")
        if not broker:
            raise ValidationError("broker", "required: the broker address, e.g. http://localhost:8080")
        selector = _get(options, "selector", "") or ""
        LabelSelector.parse(selector)  # Raises ValidationError naming the bad part.
        mapping = (_get(options, "mapping", "modulo") or "modulo").lower()
        if mapping not in MAPPINGS:
            raise ValidationError("mapping", f"want one of {', '.join(MAPPINGS)}, got {mapping!r}")
        state = _get(options, "stateLocation") or _get(options, "checkpointLocation") or ""
        if state.startswith("file:"):
            state = state[5:].lstrip("/")
            state = "/" + state
        return cls(
            broker=broker.rstrip("/"),
            selector=selector,
            committed=_bool(options, "committed", streaming),
            uuid_field=_get(options, "uuidField", "UUID") or "UUID",
            starting=_starting(_get(options, "startingOffsets")),
            max_bytes_per_trigger=_int(options, "maxBytesPerTrigger", 0),
            state_location=os.path.abspath(state) if state else "",
            mapping=mapping,
            include_acks=_bool(options, "includeAcks", False),
            fence_register=_get(options, "fenceRegister", "herald-sink") or "herald-sink",
            ring_size=max(1, _int(options, "ringSize", 65536)),
            append_bytes=max(1, _int(options, "appendBytes", 1 << 20)),
            split_bytes=max(0, _int(options, "splitBytes", 0)),
            max_partition_bytes=max(1, _int(options, "maxPartitionBytes", 64 << 20)),
            on_decode_error=OnDecodeError.parse(_get(options, "onDecodeError")),
            # Read on the driver (option, else its environment) and shipped to executors.
            security=ClientSecurity.from_env(
                auth_token=_get(options, "authToken"),
                ca_file=_get(options, "trustedCAFile") or _get(options, "caFile"),
                cert_file=_get(options, "certFile"), key_file=_get(options, "keyFile")),
        )

    def decode_errors(self, journal: str) -> DecodeErrors:
        """A task's policy for undecodable messages of ``journal`` (option ``onDecodeError``)."""
        return DecodeErrors(journal, self.on_decode_error)

    def client(self) -> BrokerClient:
        """A client of ``broker`` with these credentials (build it where it is used)."""
        return BrokerClient(self.broker, security=self.security)

    def require_state(self, what: str) -> str:
        if not self.state_location:
            raise ValidationError("stateLocation", f"required for {what}: a directory for herald's checkpoints")
        return self.state_location


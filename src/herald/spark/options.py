"""The options of format ``herald``, parsed once into a frozen, picklable value.

Spark hands a data source its options as a case-insensitive ``str → str`` map;
`HeraldOptions.parse` validates them at the edge (errors name the option) so a
bad option fails when the query is defined, not inside a task. An option Herald
does not know is an error naming the nearest one it does (``startingOffset`` →
``startingOffsets``), and Kafka's names point to Herald's (``subscribe`` →
``selector``): a misspelt option silently ignored is a query reading the wrong data.
"""

from __future__ import annotations

import difflib
import json
import os
import random
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from herald.client import BrokerClient, ClientSecurity
from herald.message.decode_errors import DecodeErrors, OnDecodeError
from herald.message.mapping import MAPPINGS
from herald.protocol.errors import ValidationError
from herald.protocol.labels import LabelSelector

__all__ = ["KNOWN_OPTIONS", "MAX_FIELDS", "HeraldOptions", "parse_json_fields"]

_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no"}

#: Every option format ``herald`` takes (docs/spark.md describes each). ``path``
#: (``load(path)``) and ``queryName`` (``writeStream.queryName``) are what Spark
#: itself passes; Herald ignores them.
KNOWN_OPTIONS = (
    "appendBytes", "authToken", "broker", "caFile", "certFile", "checkpointLocation", "committed", "dedupeKey",
    "endingOffsets", "failOnDataLoss", "fenceRegister", "includeAcks", "jsonFields", "keyField", "keyFile", "mapping",
    "maxBytesPerTrigger", "maxPartitionBytes", "maxRowsPerTrigger", "minPartitions", "onDecodeError", "path",
    "queryName", "ringSize", "selector", "splitBytes", "startingOffsets", "stateLocation", "trustedCAFile", "uuidField",
)
#: Kafka source/sink options a Kafka user may reach for, and Herald's equal.
KAFKA_EQUIVALENTS = {
    "kafka.bootstrap.servers": "broker", "subscribe": "selector", "subscribepattern": "selector",
    "assign": "selector", "topic": "selector", "maxoffsetspertrigger": "maxBytesPerTrigger",
    "startingoffsetsbytimestamp": "startingOffsets", "endingoffsetsbytimestamp": "endingOffsets",
}
BROKER_CONNECT_TIMEOUT_S = 3.0
MAX_FIELDS = 64  # jsonFields


def check_known(options: Mapping[str, str]) -> None:
    """Raise ValidationError for the first option Herald does not know, naming the nearest."""
    known = {name.lower(): name for name in KNOWN_OPTIONS}
    for given in sorted(options):
        key = given.lower()
        if key in known:
            continue
        if key in KAFKA_EQUIVALENTS:
            raise ValidationError(given, f"is Kafka's option; Herald's is {KAFKA_EQUIVALENTS[key]!r} "
                                         "(docs/spark.md, 'Coming from Kafka')")
        nearest = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
        hint = f"did you mean {known[nearest[0]]!r}?" if nearest else f"options are {', '.join(KNOWN_OPTIONS)}"
        raise ValidationError(given, f"unknown option of format herald; {hint}")


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


def _offsets(name: str, text: str | None, default: str) -> str | dict[str, int]:
    """``earliest`` / ``latest`` or a JSON ``{journal: offset}`` (-1 latest, -2 earliest)."""
    if text is None or text.strip() == "":
        return default
    if text.strip().lower() in ("earliest", "latest"):
        return text.strip().lower()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        raise ValidationError(name, f"want earliest, latest or a JSON object, got {text!r}") from None
    if not isinstance(doc, dict) or not all(type(v) is int and v >= -2 for v in doc.values()):
        raise ValidationError(name, "want a JSON object of journal: offset (-1 latest, -2 earliest)")
    return {str(k): int(v) for k, v in doc.items()}


def _starting(text: str | None) -> str | dict[str, int]:
    return _offsets("startingOffsets", text, "earliest")


def _brokers(text: str | None) -> tuple[str, ...]:
    """``broker``: one URL or a comma separated list (tried in order, as Kafka's
    bootstrap servers)."""
    urls = tuple(u.strip().rstrip("/") for u in (text or "").split(",") if u.strip())
    if not urls:
        raise ValidationError("broker", "required: the broker address, e.g. http://localhost:8080 "
                                        "(or several, comma separated)")
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationError("broker", f"want http(s)://host:port, got {url!r}")
    return urls


def _dedupe_key(text: str | None) -> str:
    """``dedupeKey``: one top-level field name (empty: no ``dedupe_key`` column)."""
    name = (text or "").strip()
    if "`" in name or "," in name:
        raise ValidationError("dedupeKey", f"want one field name without a comma or backtick, got {text!r}")
    return name


def parse_json_fields(text: str | None) -> tuple[str, ...]:
    """``jsonFields``: comma separated top-level field names (empty: none). Here,
    not in `herald.spark.fields` (pyarrow), because every process that parses
    options — the sink's commit runner too — imports this module."""
    if text is None or not text.strip():
        return ()
    names = tuple(name.strip() for name in text.split(","))
    if any(not name for name in names):
        raise ValidationError("jsonFields", f"want comma separated field names, got an empty one in {text!r}")
    bad = next((name for name in names if "`" in name), None)
    if bad is not None:
        raise ValidationError("jsonFields", f"a field name may not hold a backtick, got {bad!r}")
    lowered = [name.lower() for name in names]
    if len(set(lowered)) != len(names):
        raise ValidationError("jsonFields", f"names a field twice (Spark's column names ignore case): {text!r}")
    if len(names) > MAX_FIELDS:
        raise ValidationError("jsonFields", f"want at most {MAX_FIELDS} fields, got {len(names)}")
    return names


def _state_location(options: Mapping[str, str]) -> str:
    state = _get(options, "stateLocation") or _get(options, "checkpointLocation") or ""
    if state.startswith("file:"):
        state = "/" + state[5:].lstrip("/")
    elif "://" in state:
        raise ValidationError("stateLocation", f"want a local directory (a path or file: URL), got {state!r}")
    return os.path.abspath(state) if state else ""


@dataclass(frozen=True, slots=True)
class HeraldOptions:
    """Everything a reader or writer task needs (settings only: clients are built
    inside the task). ``state_location`` is a local directory: the reader's
    sequencer snapshots and the sink's intent records live under it."""

    brokers: tuple[str, ...]
    selector: str
    committed: bool
    uuid_field: str = "UUID"
    starting: str | dict[str, int] = "earliest"
    ending: str | dict[str, int] = "latest"
    fail_on_data_loss: bool = True
    min_partitions: int = 0
    max_bytes_per_trigger: int = 0
    max_rows_per_trigger: int = 0
    key_field: str = ""
    json_fields: tuple[str, ...] = ()
    dedupe_key: str = ""
    state_location: str = ""
    mapping: str = "modulo"
    include_acks: bool = False
    fence_register: str = "herald-sink"
    ring_size: int = 65536
    append_bytes: int = 1 << 20
    split_bytes: int = 0
    max_partition_bytes: int = 128 << 20  # Spark's spark.sql.files.maxPartitionBytes default
    security: ClientSecurity = ClientSecurity()
    on_decode_error: OnDecodeError = OnDecodeError.FAIL
    columns: tuple[str, ...] = ()  # a user schema's columns, in order (() = all: herald.spark.projection)

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> HeraldOptions:
        """Validate Spark's options; ``committed`` defaults to true for streams and
        false for batch reads (a batch read is usually an audit of raw bytes)."""
        check_known(options)
        selector = _get(options, "selector", "") or ""
        LabelSelector.parse(selector)  # Raises ValidationError naming the bad part.
        mapping = (_get(options, "mapping", "modulo") or "modulo").lower()
        if mapping not in MAPPINGS:
            raise ValidationError("mapping", f"want one of {', '.join(MAPPINGS)}, got {mapping!r}")
        ending = _offsets("endingOffsets", _get(options, "endingOffsets"), "latest")
        if streaming and _get(options, "endingOffsets") is not None:
            raise ValidationError("endingOffsets", "is for batch reads; a stream reads on (use "
                                                   "trigger(availableNow=True) to stop at today's write heads)")
        if ending == "earliest":
            raise ValidationError("endingOffsets", "want latest or a JSON object of journal: offset")
        return cls(
            brokers=_brokers(_get(options, "broker")),
            selector=selector,
            committed=_bool(options, "committed", streaming),
            uuid_field=_get(options, "uuidField", "UUID") or "UUID",
            starting=_starting(_get(options, "startingOffsets")),
            ending=ending,
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            min_partitions=_int(options, "minPartitions", 0),
            max_bytes_per_trigger=_int(options, "maxBytesPerTrigger", 0),
            max_rows_per_trigger=_int(options, "maxRowsPerTrigger", 0),
            key_field=_get(options, "keyField", "") or "",
            json_fields=parse_json_fields(_get(options, "jsonFields")),
            dedupe_key=_dedupe_key(_get(options, "dedupeKey")),
            state_location=_state_location(options),
            mapping=mapping,
            include_acks=_bool(options, "includeAcks", False),
            fence_register=_get(options, "fenceRegister", "herald-sink") or "herald-sink",
            ring_size=max(1, _int(options, "ringSize", 65536)),
            append_bytes=max(1, _int(options, "appendBytes", 1 << 20)),
            split_bytes=max(0, _int(options, "splitBytes", 0)),
            max_partition_bytes=max(1, _int(options, "maxPartitionBytes", 128 << 20)),
            on_decode_error=OnDecodeError.parse(_get(options, "onDecodeError")),
            # Read on the driver (option, else its environment) and shipped to executors.
            security=ClientSecurity.from_env(
                auth_token=_get(options, "authToken"),
                ca_file=_get(options, "trustedCAFile") or _get(options, "caFile"),
                cert_file=_get(options, "certFile"), key_file=_get(options, "keyFile")),
        )

    @property
    def broker(self) -> str:
        """The first broker address (the one a single-address caller uses)."""
        return self.brokers[0]

    def decode_errors(self, journal: str) -> DecodeErrors:
        """A task's policy for undecodable messages of ``journal`` (option ``onDecodeError``)."""
        return DecodeErrors(journal, self.on_decode_error)

    def client(self, plain: bool = False) -> BrokerClient:
        """A client with these credentials of the first of ``brokers`` that accepts a
        connection (build it where it is used). Any broker serves any journal (it
        proxies), so which one answers does not matter; one that is down is skipped.
        ``plain``: whole calls to an ``http://`` broker through ``http.client``, not
        httpx (`herald.client.plain`: a stream's fresh source runner then skips
        importing httpx for its few driver-side calls)."""
        return BrokerClient(self._reachable_broker(), security=self.security, plain=plain)

    def _reachable_broker(self) -> str:
        if len(self.brokers) == 1:
            return self.brokers[0]
        for url in self.brokers:
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            try:
                socket.create_connection((parts.hostname, port), BROKER_CONNECT_TIMEOUT_S).close()
            except OSError:
                continue
            return url
        return random.choice(self.brokers)  # none answers now: the client's own errors say so

    def require_state(self, what: str) -> str:
        """``stateLocation`` (or the sink's ``checkpointLocation``), or an error that
        says why Herald cannot find it by itself."""
        if not self.state_location:
            raise ValidationError("stateLocation", f"required for {what}: Spark does not pass a Python data source "
                                  "its query's checkpoint directory (only an explicit checkpointLocation option "
                                  "reaches a sink), so name a local directory, e.g. "
                                  ".option(\"stateLocation\", \"/ckpt/q1\")")
        return self.state_location


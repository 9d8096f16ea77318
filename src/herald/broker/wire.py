"""The JSON bodies of the control and peer APIs, as dataclasses.

They wrap the protocol's own models (`JournalSpec`, `Fragment`, `Label`, `Route`,
`Change`) in the envelopes handlers send and accept. They are the source of the
OpenAPI document's schemas (`herald.broker.openapi`); request models also fix which
keys a body may hold (`check_body`), so the documented fields are exactly the
accepted ones, and the schemathesis fuzz checks every response against them.

Field metadata ``{"schema": {...}}`` adds JSON-schema constraints (bounds, a
description) to what the field's type says.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import orjson

from herald.keyspace.base import Change
from herald.keyspace.routes import Route
from herald.protocol.errors import Status, ValidationError
from herald.protocol.fragment import Fragment
from herald.protocol.journal import JournalSpec
from herald.protocol.labels import LabelSet

MAX_PAGE = 10_000
DEFAULT_PAGE = 1_000


def _doc(text: str, **schema: Any) -> dict:
    return {"schema": {"description": text, **schema}}


def json_object(raw: bytes, what: str = "") -> dict:
    """A request body (or the part of it called ``what``) that must be one JSON
    object (400 naming ``body`` otherwise)."""
    prefix = f"{what} " if what else ""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise ValidationError("body", f"{prefix}invalid JSON: {err}") from None
    if not isinstance(body, dict):
        raise ValidationError("body", f"{prefix}must be a JSON object")
    return body


def check_body(model: type, body: dict) -> dict:
    """Refuse keys ``model`` does not declare and values of the wrong JSON type.

    Runs on the decoded body before a handler reads it; ranges stay the handler's.
    """
    fields = {f.name: f for f in dataclasses.fields(model)}
    for key, value in body.items():
        if key not in fields:
            raise ValidationError(key, f"unknown field (expected one of {', '.join(fields) or 'none'})")
        expected = fields[key].type
        if not _is_json_type(value, expected):
            raise ValidationError(key, f"must be {_JSON_NAMES.get(expected, expected)}, not {value!r:.40}")
    return body


_JSON_NAMES = {"str": "a string", "bool": "true or false", "int": "an integer", "float": "a number"}


def _is_json_type(value: Any, annotation: str) -> bool:
    if annotation == "bool":
        return isinstance(value, bool)
    if annotation == "str":
        return isinstance(value, str)
    if annotation == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True  # structured fields are parsed (and refused) by their own from_dict


# -- /v1/journals/list ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListRequest:
    selector: str = field(default="", metadata=_doc("Label selector (`prefix=a/` allowed)."))
    watch: bool = field(default=False, metadata=_doc(
        "Stream NDJSON: one snapshot per line, a new one whenever the matched set changes."))


@dataclass(frozen=True, slots=True)
class JournalEntry:
    spec: JournalSpec
    mod_revision: int
    create_revision: int
    route: Route


@dataclass(frozen=True, slots=True)
class ListResponse:
    journals: list[JournalEntry] = field(metadata=_doc("Sorted by name."))
    revision: int


# -- /v1/journals/apply -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApplyRequest:
    changes: list[Change] = field(metadata=_doc("Applied atomically, or not at all.", minItems=1))


@dataclass(frozen=True, slots=True)
class ApplyResponse:
    revision: int


# -- /v1/journals/fragments -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FragmentsRequest:
    journal: str
    begin_mod_time: float = field(default=0, metadata=_doc("Unix seconds.", minimum=0))
    end_mod_time: float = field(default=0, metadata=_doc("Unix seconds; 0 = open-ended.", minimum=0))
    next_page_token: int = field(default=0, metadata=_doc("From the previous page.", minimum=0))
    page_limit: int = field(default=DEFAULT_PAGE, metadata=_doc("", minimum=1, maximum=MAX_PAGE))
    signature_ttl: float = field(default=0, metadata=_doc(
        "Seconds; > 0 adds a signed URL to each persisted fragment.", minimum=0))


@dataclass(frozen=True, slots=True)
class FragmentItem:
    fragment: Fragment
    signed_url: str = ""


@dataclass(frozen=True, slots=True)
class FragmentsResponse:
    fragments: list[FragmentItem]
    next_page_token: int = field(metadata=_doc("0 when this is the last page."))


# -- /v1/journals/append, /prune, /v1/members/list ----------------------------------------


@dataclass(frozen=True, slots=True)
class CommitBody:
    journal: str
    begin: int
    end: int
    sum: str = field(metadata=_doc("SHA1 of the appended bytes, hex."))


@dataclass(frozen=True, slots=True)
class AppendResponse:
    commit: CommitBody
    registers: LabelSet
    write_head: int


@dataclass(frozen=True, slots=True)
class PruneRequest:
    journal: str
    dry_run: bool = False
    now: float = field(default=0, metadata=_doc("Prune as of this unix time; 0 = now.", minimum=0))


@dataclass(frozen=True, slots=True)
class PruneResponse:
    removed: list[Fragment]
    dry_run: bool


@dataclass(frozen=True, slots=True)
class MembersRequest:
    """An empty object (or no body)."""


@dataclass(frozen=True, slots=True)
class MemberInfo:
    zone: str
    suffix: str
    endpoint: str
    primary_journals: int
    replica_journals: int


@dataclass(frozen=True, slots=True)
class MembersResponse:
    members: list[MemberInfo]


# -- peers: /v1/replicate/* -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SyncRequest:
    end: int
    registers: LabelSet
    fragment_begin: int


@dataclass(frozen=True, slots=True)
class SyncResponse:
    begin: int
    end: int
    registers: LabelSet


# -- errors -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ErrorBody:
    """Every error: its status (one HTTP code each), a message, and the field at fault."""

    # ``field`` is a key of the body, so dataclasses.field is spelled out below.
    status: Status
    message: str
    field: str | None = dataclasses.field(metadata=_doc("Dotted path of the bad input, e.g. "
                                            "`changes[0].upsert.fragment.stores[0]`."))
    write_head: int = dataclasses.field(default=0, metadata=_doc("OFFSET_NOT_YET_AVAILABLE, FRAGMENT_MISSING."))
    registers: LabelSet = dataclasses.field(default_factory=LabelSet,
                                            metadata=_doc("REGISTER_MISMATCH: current registers."))
    journal: str = dataclasses.field(default="", metadata=_doc("JOURNAL_NOT_FOUND."))

"""Sans-I/O client protocol: every broker call as a generator of requests.

An operation is a generator that *yields* a `Request`, is *sent* the `Response`,
and *returns* its result (several round trips for paged calls). It never touches
a socket or the clock, so one definition is driven by both the sync runner
(`httpx.Client`) and the async runner (`httpx.AsyncClient`) in `herald.client.broker`:

    op = list_journals("prefix=foobar/")
    request = next(op)                      # Request("POST", "/v1/journals/list", …)
    try:
        op.send(Response(200, {}, body))    # → StopIteration(value=[JournalInfo…])
    except StopIteration as done:
        journals = done.value
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from herald.client.models import AppendResult, FragmentInfo, JournalInfo, ReadHead
from herald.keyspace.base import Change
from herald.protocol.errors import HeraldError, Status
from herald.protocol.journal import validate_journal_name
from herald.protocol.labels import LabelSelector, LabelSet

T = TypeVar("T")

FRAGMENTS_PAGE_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request, relative to the broker address."""

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    json: Any = None
    content: bytes | None = None


@dataclass(frozen=True, slots=True)
class Response:
    """A whole (non-streamed) HTTP response."""

    status: int
    headers: Mapping[str, str]
    body: bytes = b""

    def json(self) -> Any:
        return orjson.loads(self.body)


Operation = Generator[Request, Response, T]


def raise_for_error(resp: Response, ok: Iterable[int] = (200,)) -> None:
    """Raise the typed `HeraldError` the broker sent, if ``resp`` is not OK.
    A non-JSON error (a proxy's HTML page) becomes INTERNAL naming the HTTP code."""
    if resp.status in ok:
        return
    try:
        doc = resp.json()
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and "status" in doc:
        err = HeraldError.from_dict(doc)
        if "X-Write-Head" in resp.headers and "write_head" not in err.extra:
            err.extra["write_head"] = int(resp.headers["X-Write-Head"])
        raise err
    text = resp.body[:200].decode("utf-8", "replace").strip()
    raise HeraldError(Status.INTERNAL, f"HTTP {resp.status} from broker: {text or '(no body)'}")


def _journal_path(journal: str) -> str:
    validate_journal_name(journal.partition(";")[0], "journal")
    return "/" + journal


# -- operations ----------------------------------------------------------------------------


def list_journals(selector: str | LabelSelector = "") -> Operation[list[JournalInfo]]:
    """Journals matching ``selector``, sorted by name."""
    resp = yield Request("POST", "/v1/journals/list", json={"selector": str(selector), "watch": False})
    raise_for_error(resp)
    return parse_list(resp.json())


def parse_list(doc: Mapping[str, Any]) -> list[JournalInfo]:
    """A List snapshot (also one line of a watch stream) → `JournalInfo` list."""
    return [JournalInfo.from_dict(d, f"journals[{i}]") for i, d in enumerate(doc.get("journals") or [])]


def apply_changes(changes: list[Change]) -> Operation[int]:
    """Apply all ``changes`` atomically; returns the keyspace revision."""
    body = {"changes": [c.to_dict() if isinstance(c, Change) else dict(c) for c in changes]}
    resp = yield Request("POST", "/v1/journals/apply", json=body)
    raise_for_error(resp)
    return int(resp.json()["revision"])


def journal_fragments(journal: str, signature_ttl_s: float = 0, begin_mod_time: float = 0,
                   end_mod_time: float = 0) -> Operation[list[FragmentInfo]]:
    """Every fragment of ``journal`` (all pages), in offset order."""
    out: list[FragmentInfo] = []
    token = 0
    while True:
        resp = yield Request("POST", "/v1/journals/fragments", json={
            "journal": journal, "begin_mod_time": begin_mod_time, "end_mod_time": end_mod_time,
            "next_page_token": token, "page_limit": FRAGMENTS_PAGE_LIMIT,
            "signature_ttl": signature_ttl_s})
        raise_for_error(resp)
        doc = resp.json()
        out += [FragmentInfo.from_dict(d, f"fragments[{i}]") for i, d in enumerate(doc.get("fragments") or [])]
        token = int(doc.get("next_page_token") or 0)
        if not token:
            return out


def encode_register_headers(check: LabelSelector | str | None, union: LabelSet | str | None,
                     subtract: LabelSet | str | None) -> dict[str, str]:
    """The ``X-*-Registers`` headers of an append, validated here so a bad selector
    fails before any bytes are sent."""
    headers = {}
    if check is not None:
        headers["X-Check-Registers"] = str(check if isinstance(check, LabelSelector)
                                           else LabelSelector.parse(check))
    for name, labels in (("X-Union-Registers", union), ("X-Subtract-Registers", subtract)):
        if labels is not None:
            headers[name] = str(labels if isinstance(labels, LabelSet) else LabelSet.parse(labels))
    return headers


def append_request(journal: str, content: bytes, check: LabelSelector | str | None = None,
                   union: LabelSet | str | None = None,
                   subtract: LabelSet | str | None = None) -> Request:
    return Request("PUT", _journal_path(journal), headers=encode_register_headers(check, union, subtract),
                   content=bytes(content))


def append(journal: str, content: bytes, check_registers: LabelSelector | str | None = None,
           union_registers: LabelSet | str | None = None,
           subtract_registers: LabelSet | str | None = None) -> Operation[AppendResult]:
    """Append ``content`` as one atomic write; returns once it is durable. A failed
    register check raises `RegisterMismatchError` and writes nothing [I-REG-1]."""
    resp = yield append_request(journal, content, check_registers, union_registers, subtract_registers)
    raise_for_error(resp, ok=(200, 204))
    return AppendResult.from_headers(resp.headers)


def write_head(journal: str) -> Operation[int]:
    """The journal's current write head (a ``HEAD`` at offset −1)."""
    resp = yield Request("HEAD", _journal_path(journal), params={"offset": "-1"})
    raise_for_error(resp)
    return int(resp.headers["X-Write-Head"])


def head(journal: str, offset: int) -> Operation[ReadHead]:
    """Metadata of a read at ``offset`` (a ``HEAD``): where it would start, the write
    head, and the covering fragment's name and location (read offload)."""
    resp = yield Request("HEAD", _journal_path(journal), params={"offset": str(offset)})
    raise_for_error(resp)
    return ReadHead.from_headers(resp.headers, offset)


def prune(journal: str, dry_run: bool = False, now: float = 0) -> Operation[list[FragmentInfo]]:
    """Remove persisted fragments older than ``fragment.retention``; returns them."""
    body: dict[str, Any] = {"journal": journal, "dry_run": dry_run}
    if now:
        body["now"] = now
    resp = yield Request("POST", "/v1/journals/prune", json=body)
    raise_for_error(resp)
    return [FragmentInfo.from_dict({"fragment": d}, f"removed[{i}]")
            for i, d in enumerate(resp.json().get("removed") or [])]


def list_members() -> Operation[list[dict[str, Any]]]:
    """The cluster's brokers: zone, suffix, endpoint, primary and replica journal counts."""
    resp = yield Request("POST", "/v1/members/list", json={})
    raise_for_error(resp)
    return list(resp.json().get("members") or [])


def read_request(journal: str, offset: int, block: bool, end_offset: int) -> Request:
    """A streaming ``GET``; the caller parses the head with `ReadHead.from_headers`."""
    params = {"offset": str(offset), "block": "true" if block else "false"}
    if end_offset:
        params["end_offset"] = str(end_offset)
    return Request("GET", _journal_path(journal), params=params)


def watch_request(selector: str | LabelSelector) -> Request:
    return Request("POST", "/v1/journals/list", json={"selector": str(selector), "watch": True})

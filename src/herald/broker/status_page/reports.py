"""What running pipelines report to a broker, for its status page.

A Spark pipeline's driver (``herald pipelines dedupe``) POSTs a `PipelineReport`
to ``/v1/pipelines/report`` after its micro-batches: its lag per journal (write
head − read through) and, for a dedupe, its state (keys, bytes, effective window)
and counts. The broker keeps the latest report of each pipeline in memory — at
most ``MAX_PIPELINES``, each forgotten ``FORGET_AFTER_S`` after its last report —
and shows them; nothing is persisted, so a restarted broker shows a pipeline again
at its next report. Reports are small and come once per batch: nothing here is
on the append path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import orjson
from aiohttp import web

from herald.broker import wire
from herald.broker.endpoints import Endpoint, add_endpoints
from herald.protocol.errors import ValidationError, with_field_prefix
from herald.protocol.journal import validate_journal_name

__all__ = ["ENDPOINTS", "FORGET_AFTER_S", "MAX_PIPELINES", "PipelineReport", "Reports", "add_routes"]

MAX_PIPELINES = 64
MAX_JOURNALS = 1024
MAX_NAME_CHARS = 128
FORGET_AFTER_S = 600.0
REPORTS_KEY = web.AppKey("herald_pipeline_reports", object)


def _doc(text: str, **schema) -> dict:
    return {"schema": {"description": text, **schema}}


@dataclass(frozen=True, slots=True)
class JournalLag:
    journal: str
    read_through: int = field(metadata=_doc("Offset the pipeline has read through.", minimum=0))
    write_head: int = field(metadata=_doc("The journal's write head when the pipeline looked.", minimum=0))


@dataclass(frozen=True, slots=True)
class DedupeState:
    state_keys: int = field(default=0, metadata=_doc("Keys in the de-duplication state.", minimum=0))
    state_bytes: int = field(default=0, metadata=_doc("Bytes of the state (RocksDB SST files).", minimum=0))
    effective_window_s: float = field(default=0, metadata=_doc("Window now kept, seconds.", minimum=0))
    events_in: int = field(default=0, metadata=_doc("Events read since the driver started.", minimum=0))
    events_out: int = field(default=0, metadata=_doc("Events published.", minimum=0))
    duplicates_dropped: int = field(default=0, metadata=_doc("Duplicates dropped.", minimum=0))


@dataclass(frozen=True, slots=True)
class PipelineReport:
    """One pipeline's latest report."""

    pipeline: str = field(metadata=_doc("Name of the pipeline (its query name, or the checkpoint).",
                                        minLength=1, maxLength=MAX_NAME_CHARS))
    journals: list[JournalLag] = field(default_factory=list, metadata=_doc("Lag per input journal."))
    dedupe: DedupeState | None = None
    batch_duration_s: float = field(default=0, metadata=_doc("Duration of the last micro-batch.", minimum=0))
    batches: int = field(default=0, metadata=_doc("Micro-batches since the driver started.", minimum=0))

    @classmethod
    def from_dict(cls, body: dict) -> PipelineReport:
        """Validate a report's body, naming the field at fault."""
        wire.check_body(cls, body)
        name = body.get("pipeline")
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS or not name.isprintable():
            raise ValidationError("pipeline", f"must be 1..{MAX_NAME_CHARS} printable characters")
        journals = body.get("journals", [])
        if not isinstance(journals, list) or len(journals) > MAX_JOURNALS:
            raise ValidationError("journals", f"must be a list of at most {MAX_JOURNALS} items")
        lags = [_lag(item, f"journals[{i}]") for i, item in enumerate(journals)]
        dedupe = body.get("dedupe")
        if dedupe is not None:
            if not isinstance(dedupe, dict):
                raise ValidationError("dedupe", "must be an object")
            with with_field_prefix("dedupe"):
                wire.check_body(DedupeState, dedupe)
                dedupe = DedupeState(**{k: _number(dedupe, k, "") for k in dedupe})
        return cls(name, lags, dedupe, _number(body, "batch_duration_s", ""), int(_number(body, "batches", "")))


def _lag(item: object, field_name: str) -> JournalLag:
    if not isinstance(item, dict):
        raise ValidationError(field_name, "must be an object")
    for key in item:
        if key not in ("journal", "read_through", "write_head"):
            raise ValidationError(f"{field_name}.{key}", "unknown field (expected journal, read_through, write_head)")
    journal = item.get("journal")
    validate_journal_name(journal, field=f"{field_name}.journal")
    offsets = {}
    for key in ("read_through", "write_head"):
        value = item.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 63:
            raise ValidationError(f"{field_name}.{key}", "must be an offset (an integer ≥ 0)")
        offsets[key] = value
    return JournalLag(journal, **offsets)


def _number(body: dict, key: str, prefix: str) -> float:
    value = body.get(key, 0)
    name = f"{prefix}.{key}" if prefix else key
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1e18:
        raise ValidationError(name, "must be a number ≥ 0")
    return value


@dataclass(frozen=True, slots=True)
class Received:
    report: PipelineReport
    at_unix: float


class Reports:
    """The latest report of each pipeline, bounded in count and age."""

    def __init__(self) -> None:
        self._latest: dict[str, Received] = {}

    def put(self, report: PipelineReport, now_unix: float) -> None:
        self._latest.pop(report.pipeline, None)
        self._latest[report.pipeline] = Received(report, now_unix)
        self._forget(now_unix)
        while len(self._latest) > MAX_PIPELINES:  # the one heard from longest ago goes
            del self._latest[next(iter(self._latest))]

    def current(self, now_unix: float) -> list[Received]:
        self._forget(now_unix)
        return sorted(self._latest.values(), key=lambda r: r.report.pipeline)

    def _forget(self, now_unix: float) -> None:
        for name in [n for n, r in self._latest.items() if now_unix - r.at_unix > FORGET_AFTER_S]:
            del self._latest[name]


@dataclass(frozen=True, slots=True)
class ReportAccepted:
    pipelines: int = field(metadata=_doc("Pipelines the broker now shows."))


async def handle_report(request: web.Request) -> web.Response:
    """Record a pipeline's lag and state, shown on the status page (``/``)."""
    report = PipelineReport.from_dict(wire.json_object(await request.read()))
    reports: Reports = request.app[REPORTS_KEY]
    now = time.time()
    reports.put(report, now)
    body = orjson.dumps({"pipelines": len(reports.current(now))})
    return web.Response(body=body, content_type="application/json")


ENDPOINTS = (Endpoint("POST", "/v1/pipelines/report", handle_report, "pipelines", PipelineReport, ReportAccepted),)


def add_routes(app: web.Application) -> None:
    app[REPORTS_KEY] = Reports()
    add_endpoints(app, ENDPOINTS)

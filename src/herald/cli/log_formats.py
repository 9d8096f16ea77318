"""How a log record is written: ``--log.format text`` (default) or ``json``.

Context travels as fields, not only as words in the message: log calls pass
``extra={"journal": name, "offset": offset}`` and each format writes them its
way — ``json`` as keys of the line's object (one object per line, an ISO-8601 UTC
``time``, ``level``, ``logger``, ``msg``, then the fields, and ``error`` with the
traceback if any), ``text`` as ``key=value`` after the message::

    log.warning("read ended early", extra={"journal": "a/b", "offset": 1024})
    # text: 2026-11-24T22:30:00.123Z WARNING herald.broker.gateway: read ended early journal=a/b offset=1024
    # json: {"time":"2026-11-24T22:30:00.123Z","level":"warning",...,"journal":"a/b","offset":1024}
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson

__all__ = ["JsonFormatter", "TextFormatter", "fields_of", "iso_time"]

#: Attributes every LogRecord has: anything else on a record came from ``extra=``.
_RECORD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime",
                                                                                      "taskName"}


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a log call passed with ``extra=``, in the order given."""
    return {k: v for k, v in record.__dict__.items() if k not in _RECORD_ATTRS and not k.startswith("_")}


def iso_time(record: logging.LogRecord) -> str:
    """``2026-11-24T22:30:00.123Z``: ISO 8601, UTC, milliseconds."""
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg, the fields, the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {"time": iso_time(record), "level": record.levelname.lower(),
                               "logger": record.name, "msg": record.getMessage()}
        for key, value in fields_of(record).items():
            doc.setdefault(key, value)
        if record.exc_info:
            doc["error"] = self.formatException(record.exc_info)
        elif record.exc_text:
            doc["error"] = record.exc_text
        return orjson.dumps(doc, default=str).decode()


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value …`` (and the traceback below)."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = f"{iso_time(record)} {super().format(record)}"
        fields = fields_of(record)
        if not fields:
            return line
        head, sep, trace = line.partition("\n")
        suffix = " ".join(f"{key}={value}" for key, value in fields.items())
        return f"{head} {suffix}{sep}{trace}"

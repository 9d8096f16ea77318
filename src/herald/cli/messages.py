"""``herald attach-uuids``: give each input record a fresh message UUID (gazctl's equal).

One producer per run; each record gets an OUTSIDE_TXN UUID from a clock that
ticks 1 µs per record, so records published this way are de-duplicated by
read-committed readers if the same output is appended twice.

    cat events.ndjson | herald attach-uuids | herald journals append -l name=events
"""

from __future__ import annotations

import os
import sys
import time

import typer

from herald.message import OUTSIDE_TXN, Clock, ProducerID, build_uuid, framing_for, uuid_str
from herald.protocol.errors import ValidationError

FORMATS = {"ndjson": "application/x-ndjson", "csv": "text/csv"}


def attach_uuids_command(
    field: str = typer.Option("UUID", "--field", help="NDJSON: the top-level field to put the UUID in."),
    fmt: str = typer.Option("ndjson", "--format", help="ndjson (UUID as a field) or csv (UUID as the first column)."),
) -> None:
    """Read records from stdin, write them to stdout each with a fresh UUID."""
    if fmt not in FORMATS:
        raise ValidationError("--format", f"must be one of {', '.join(FORMATS)} ({fmt!r})")
    producer = ProducerID.new(os.urandom(6))
    clock = Clock.from_unix_ns(time.time_ns())
    framing = framing_for(FORMATS["ndjson"], field)
    out = sys.stdout.buffer
    for number, line in enumerate(sys.stdin.buffer, 1):
        record = line.rstrip(b"\r\n")
        if not record:
            continue
        uuid = build_uuid(producer, clock.tick(), OUTSIDE_TXN)
        if fmt == "csv":
            out.write(uuid_str(uuid).encode() + b"," + record + b"\n")
        elif record.startswith(b"{"):
            out.write(framing.encode(record, uuid))
        else:
            raise ValidationError("stdin", f"line {number} is not a JSON object")
    out.flush()

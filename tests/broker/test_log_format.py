"""``herald serve --log.format json``: one JSON object per line, ISO-8601 UTC times,
context in fields (journal, offset, store…), and expected events — a reader that
goes away mid-stream, a client that drops an append mid-body — never logged as a
warning or an error, let alone with a traceback."""

from __future__ import annotations

import json
import re
import socket

from herald.testing import apply_specs, journal_spec, wait_until

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
JOURNAL = "logs/events"


def records(proc) -> list[dict]:
    return [json.loads(line) for line in list(proc.stderr_lines)]


def test_json_logs_carry_fields_and_expected_disconnects_stay_quiet(broker_factory, tmp_path):
    proc = broker_factory(tmp_path / "data", None, "--log.format", "json", "--log.level", "debug")
    apply_specs(proc.url, journal_spec(JOURNAL, length=1024))
    with proc.client() as http:
        http.put(f"/{JOURNAL}", content=b'{"n": 0, "pad": "' + b"x" * 1100 + b'"}\n').raise_for_status()

        # A blocking reader that goes away, then appends it would have been sent.
        host, port = proc.url.removeprefix("http://").rsplit(":", 1)
        reader = socket.create_connection((host, int(port)))
        reader.sendall(f"GET /{JOURNAL}?offset=0&block=true HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert reader.recv(4096).startswith(b"HTTP/1.1 206")
        reader.close()
        # A client that sends half an append body and goes away.
        dropped = socket.create_connection((host, int(port)))
        dropped.sendall(f"PUT /{JOURNAL} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nhalf".encode())
        dropped.close()

        def reader_gone() -> bool:
            http.put(f"/{JOURNAL}", content=b'{"n": 1, "pad": "' + b"y" * 1100 + b'"}\n').raise_for_status()
            return any(r["msg"] == "reader went away" for r in records(proc))
        wait_until(reader_gone, "the broker to notice the reader went away")

    logs = records(proc)  # every line parses as one JSON object
    assert all(ISO_UTC.match(r["time"]) for r in logs), logs[:3]
    gone = next(r for r in logs if r["msg"] == "reader went away")
    assert gone["level"] == "debug" and gone["journal"] == JOURNAL and isinstance(gone["offset"], int)
    serving = next(r for r in logs if r["msg"] == "serving journal")
    assert serving["journal"] == JOURNAL and serving["write_head"] == 0
    persisted = wait_until(lambda: next((r for r in records(proc) if r["msg"] == "persisted fragment"), None),
                           "a persisted fragment logged")
    assert persisted["journal"] == JOURNAL and persisted["store"] == "file:///" and persisted["fragment"]
    loud = [r for r in records(proc) if r["level"] in ("warning", "error", "critical") or "error" in r]
    assert not loud, loud

"""``herald journals read``: journal content to stdout, resumable with an offsets file.

    herald journals read -l name=example/journal --offsets-file seen.json   # resume
    herald journals read -l prefix=logs/ --offset 0 --end-offset 1048576     # a window

``--offsets-file F`` (gazctl's ``--offsets`` and ``--offsets-out`` in one file): a
JSON object ``{journal: offset}``; each journal named there starts at its offset
(others at ``--offset`` / ``--tail``), and when the read ends — the write head, the
``--end-offset``, or Ctrl-C during ``--block`` — the offset after the last byte
written to stdout is saved back, atomically, for the next run.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import orjson

from herald.cli.output import progress
from herald.client import BrokerClient, JournalInfo, RetryReader
from herald.message.mapping import NoJournalsError
from herald.protocol.errors import ValidationError

__all__ = ["Offsets", "matched", "read_committed_journals", "read_journals"]

log = logging.getLogger(__name__)


def matched(client: BrokerClient, selector: str) -> list[JournalInfo]:
    """The journals ``selector`` matches; NoJournalsError if none."""
    infos = client.list(selector)
    if not infos:
        raise NoJournalsError()
    return infos


class Offsets:
    """The ``--offsets-file``: start offsets in, next offsets out (thread-safe)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._next: dict[str, int] = self._load() if path else {}

    def _load(self) -> dict[str, int]:
        assert self.path is not None
        try:
            doc = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}  # the first run creates it
        except (OSError, orjson.JSONDecodeError) as err:
            raise ValidationError("--offsets-file", f"cannot read {self.path} ({err}); it must be a JSON "
                                                    "object of journal: offset (or absent)") from None
        if not isinstance(doc, dict) or not all(type(v) is int and v >= 0 for v in doc.values()):
            raise ValidationError("--offsets-file", f"{self.path} must be a JSON object of journal: "
                                                    "offset >= 0")
        return {str(k): v for k, v in doc.items()}

    def start(self, journal: str, default: int) -> int:
        return self._next.get(journal, default)

    def advance(self, journal: str, offset: int) -> None:
        with self._lock:
            self._next[journal] = offset

    def save(self) -> None:
        """Write the next offsets (temp file + rename: never a torn file)."""
        if self.path is None:
            return
        with self._lock:
            data = orjson.dumps(self._next, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"
        directory = self.path.parent if str(self.path.parent) else Path(".")
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, self.path)


def _stdout() -> Any:
    sys.stdout.flush()
    return sys.stdout.buffer


def _read_one(client: BrokerClient, journal: str, offset: int, end: int, block: bool, offload: bool,
              offsets: Offsets) -> None:
    """Copy one journal to stdout (non-blocking: up to its write head or ``end``)."""
    log.info("read started journal=%s offset=%d", journal, offset)
    total = None
    if sys.stderr.isatty() and not block:
        head = client.write_head(journal)
        total = max(0, (min(head, end) if end else head) - max(offset, 0))
    out = _stdout()
    with RetryReader(client, journal, offset, block=block, end_offset=end, offload=offload) as reader, \
            progress(f"read {journal}", total) as bar:
        for at, chunk in reader:
            out.write(chunk)
            out.flush()
            offsets.advance(journal, at + len(chunk))
            bar.advance(len(chunk))
        if reader.offset >= 0:
            offsets.advance(journal, reader.offset)  # an empty read still resolves -1 / a jump.


def _read_concurrently(client: BrokerClient, starts: dict[str, int], end: int, offload: bool,
                       offsets: Offsets) -> None:
    """Blocking reads of several journals at once. Output is cut at line ends so
    records of different journals never interleave (gazette issue #48)."""
    lock, out = threading.Lock(), _stdout()
    errors: list[BaseException] = []

    def pump(journal: str, offset: int) -> None:
        pending, pending_at = b"", offset
        try:
            log.info("read started journal=%s offset=%d", journal, offset)
            for at, chunk in RetryReader(client, journal, offset, block=True, end_offset=end, offload=offload):
                if not pending:
                    pending_at = at
                pending += chunk
                cut = pending.rfind(b"\n") + 1
                if cut:
                    with lock:
                        out.write(pending[:cut])
                        out.flush()
                    offsets.advance(journal, pending_at + cut)
                    pending, pending_at = pending[cut:], pending_at + cut
        except BaseException as err:  # noqa: BLE001 — re-raised in the main thread.
            errors.append(err)

    threads = [threading.Thread(target=pump, args=item, daemon=True) for item in starts.items()]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive() and not errors:
            t.join(0.2)  # a timeout keeps Ctrl-C working.
    if errors:
        raise errors[0]


def read_journals(client: BrokerClient, names: list[str], start: int, end: int, block: bool, offload: bool,
                  offsets: Offsets) -> None:
    """Each journal from its start (offsets file, else ``start``) to ``end`` / its
    head; the offsets file is saved however the read ends."""
    starts = {name: offsets.start(name, start) for name in names}
    if end and any(s >= 0 and end <= s for s in starts.values()):
        log.info("some journals already read through --end-offset %d", end)
    try:
        if block and len(names) > 1:
            _read_concurrently(client, starts, end, offload, offsets)
            return
        for name in names:
            _read_one(client, name, starts[name], end, block, offload, offsets)
    finally:
        offsets.save()


def read_committed_journals(client: BrokerClient, names: list[str], block: bool, on_decode_error: str) -> None:
    """Decoded committed messages of each journal, one per line [I-SEQ-1]."""
    from herald.client.committed import is_ack, read_committed
    from herald.message.decode_errors import DecodeErrors, OnDecodeError

    out = _stdout()
    policy = OnDecodeError.parse(on_decode_error, "--on-decode-error")
    for journal in names:
        errors = DecodeErrors(journal, policy)
        for env in read_committed(client, journal, block=block, errors=errors):
            if not is_ack(env):
                out.write(env.value + b"\n")
                out.flush()
        if (stats := errors.statistics()).skipped:
            print(f"{journal}: skipped {stats.skipped} undecodable messages (offsets {stats.first_offset}"
                  f"..{stats.last_offset})", file=sys.stderr)

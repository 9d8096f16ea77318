"""The embedded keyspace: specs in one JSON file under the data dir.

Writes go to a temporary file that is fsync'd and renamed over the old one, so a
crash leaves either the old or the new keyspace, never a torn one. Watchers (the
broker's resolver, list watches) subscribe with ``on_change``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import orjson

from herald.durable import fsync_directory, make_durable_dirs
from herald.keyspace.base import Change, Entry, check_expectations
from herald.protocol.journal import JournalSpec

log = logging.getLogger(__name__)


class LocalKeySpace:
    """A one-process keyspace; not thread-safe (the broker's event loop owns it)."""

    def __init__(self, data_dir: Path):
        self.path = data_dir / "keyspace.json"
        self.revision = 0
        self._entries: dict[str, Entry] = {}
        self._observers: list[Callable[[int], None]] = []
        make_durable_dirs(data_dir)
        self._load()

    def _load(self) -> None:
        try:
            doc = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return
        self.revision = doc["revision"]
        for name, item in doc["items"].items():
            spec = JournalSpec.from_dict(item["spec"])
            self._entries[name] = Entry(spec, item["create_revision"], item["mod_revision"])
        log.info("loaded keyspace path=%s journals=%d revision=%d",
                 self.path, len(self._entries), self.revision)

    def entries(self) -> dict[str, Entry]:
        return dict(self._entries)

    def get(self, name: str) -> Entry | None:
        return self._entries.get(name)

    def on_change(self, observer: Callable[[int], None]) -> None:
        self._observers.append(observer)

    async def wait_for_revision(self, revision: int, timeout_s: float = 10.0) -> None:
        """A local keyspace is its own only writer: every revision it knows is applied."""

    async def apply(self, changes: list[Change]) -> int:
        """Apply all changes or none (stale revisions raise, nothing changes)."""
        check_expectations(self._entries, changes)
        revision = self.revision + 1
        entries = dict(self._entries)
        for change in changes:
            if change.delete is not None:
                entries.pop(change.delete, None)
                continue
            old = entries.get(change.name)
            created = old.create_revision if old else revision
            entries[change.name] = Entry(change.upsert, created, revision)  # type: ignore[arg-type]
        self._save(entries, revision)
        self._entries, self.revision = entries, revision
        for observer in self._observers:
            observer(revision)
        return revision

    def _save(self, entries: dict[str, Entry], revision: int) -> None:
        doc = {"revision": revision, "items": {
            name: {"spec": e.spec.to_dict(), "create_revision": e.create_revision,
                   "mod_revision": e.mod_revision} for name, e in sorted(entries.items())}}
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_directory(self.path.parent)

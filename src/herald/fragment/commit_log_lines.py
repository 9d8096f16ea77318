"""Commit lines the commit log holds durably, written to their commits files later.

A logged round's commit lines are already durable in the log's record, so the round
does not write them (`herald.fragment.commit_log.CommitLog.defer`): one syscall per
group less on the round thread, where a round of many journals holds about one
append per group. They wait here and go to their commits files in batches on the
log's helper thread. Readers never read commits files; recovery does, after replay
(which writes every logged line), and a checkpoint runs after the lines of its
segment (same thread, submitted first).

A batch that cannot be written must not be lost with its segment: `failed` is then
set, the log refuses rounds and no checkpoint deletes a segment (the next start
replays them).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from herald.fragment.commit_log_worker import LogWorker, write_lines

__all__ = ["LINE_BATCH", "DeferredLines"]

log = logging.getLogger(__name__)

#: Commit lines of logged groups wait in memory (the log holds them durably) and go
#: to their commits files in batches of this many, on the helper thread.
LINE_BATCH = 256


class DeferredLines:
    """One commit log's deferred lines (see the module doc). Thread-safe."""

    def __init__(self, worker: LogWorker, writeback_bytes: int) -> None:
        self._worker = worker
        self._writeback_bytes = writeback_bytes
        self._lines: list[tuple[Path, int, bytes]] = []  # (commits file, offset, line)
        self._lock = threading.Lock()  # rounds defer, journals closing flush
        self._batches_unwritten = 0  # batches handed to the helper thread, not yet written
        self.failed: OSError | None = None  # a batch could not be written

    def defer(self, lines: Sequence[tuple[Path, int, bytes]]) -> None:
        """Keep ``lines``; a full batch goes to the helper thread."""
        with self._lock:
            self._lines.extend(lines)
            full = len(self._lines) >= LINE_BATCH
        if full:
            self.submit()

    @property
    def pending(self) -> bool:
        """Whether some deferred line may not be in its commits file yet."""
        return bool(self._lines or self._batches_unwritten)

    def submit(self) -> None:
        """Hand every line kept so far to the helper thread, as one batch."""
        with self._lock:
            batch, self._lines = self._lines, []
            self._batches_unwritten += bool(batch)
        if batch:
            self._worker.submit(functools.partial(self._write, batch))

    def _write(self, batch: list[tuple[Path, int, bytes]]) -> None:
        """On the helper thread."""
        try:
            write_lines(batch, self._writeback_bytes)
        except OSError as err:
            log.error("commit log: deferred commit lines could not be written; refusing appends "
                      "until restart (the log keeps them for replay): %s", err)
            self.failed = err
        finally:
            with self._lock:
                self._batches_unwritten -= 1

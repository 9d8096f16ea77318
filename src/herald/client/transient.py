"""Transient broker errors and how to wait them out: `is_transient` (worth
retrying), `Backoff` (exponential delays that a close cancels) and
`retry_transient` (a call repeated until a deadline).

Kept apart from the retrying reader and read offload (`herald.client.retry`,
`herald.client.offload`) so that appenders, watchers, the CLI and Spark's
driver-side processes import only httpx and the protocol errors, not the
fragment stores (fsspec, codecs) a read offload needs.

    answer = retry_transient(lambda: client.list(selector), deadline_s=30, what="list")
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from herald.protocol.errors import HeraldError, Status

__all__ = ["TRANSIENT_STATUSES", "Backoff", "is_transient", "retry_transient"]

log = logging.getLogger(__name__)

TRANSIENT_STATUSES = frozenset({
    Status.NO_JOURNAL_PRIMARY_BROKER, Status.NOT_JOURNAL_PRIMARY_BROKER,
    Status.INSUFFICIENT_JOURNAL_BROKERS, Status.NOT_JOURNAL_BROKER,
    Status.FRAGMENT_STORE_UNHEALTHY, Status.INTERNAL,
})

T = TypeVar("T")


def is_transient(err: BaseException) -> bool:
    """Worth retrying: the broker was unreachable or answered a 5xx-class status.
    Never cached: the next attempt starts fresh (Gazette issue #462)."""
    httpx = sys.modules.get("httpx")  # not loaded: ``err`` cannot be one of its errors
    if httpx is not None and isinstance(err, httpx.TransportError):
        return True
    return isinstance(err, HeraldError) and err.status in TRANSIENT_STATUSES


def retry_transient(call: Callable[[], T], deadline_s: float, what: str,
                    on_retry: Callable[[BaseException], None] | None = None) -> T:
    """``call()``, again after each transient broker error (`is_transient`) until
    ``deadline_s`` has passed: a fail-over's leases and re-assignment take seconds,
    and a peerset briefly short of its replication refuses appends meanwhile.
    ``on_retry`` sees each error that is retried (for counters). Only for calls
    whose repetition is acceptable: reads, ACK intents (readers ignore repeats),
    and at-least-once appends (AppendService, the CLI), where a response lost after
    the commit duplicates the content, as in Gazette's AppendService."""
    backoff, deadline = Backoff(), time.monotonic() + deadline_s
    while True:
        try:
            return call()
        except Exception as err:  # noqa: BLE001 - only transient errors are retried; others raise
            if not is_transient(err) or time.monotonic() > deadline:
                raise
            log.warning("%s failed (retrying): %s", what, err)
            if on_retry is not None:
                on_retry(err)
            backoff.wait()


class Backoff:
    """Exponential delays (``initial_s`` doubling to ``max_s``); `wait` returns early
    (False) once `cancel` is called, so closing a reader never waits out a delay."""

    def __init__(self, initial_s: float = 0.05, max_s: float = 2.0) -> None:
        self.initial_s, self.max_s = initial_s, max_s
        self.attempt = 0
        self._cancelled = threading.Event()

    def wait(self) -> bool:
        delay = min(self.max_s, self.initial_s * (2 ** self.attempt))
        self.attempt += 1
        return not self._cancelled.wait(delay)

    def reset(self) -> None:
        self.attempt = 0

    def cancel(self) -> None:
        self._cancelled.set()
